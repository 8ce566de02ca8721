package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir"
)

func runLog(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, `usage: ctrlnode log dump | verify --data-dir DIR [flags]

Reads a voter's data directory offline (stop the voter first): its raft log,
in whichever store holds it (segments, wal or bolt), and its snapshots.

  dump    prints every log entry (index, term, type) with each record decoded,
          and every snapshot (index, term, size, configuration, what its image
          holds and its state hash); --json for JSON lines
  verify  checks every checksum (the log store's per entry, raft's per
          snapshot), that every entry and snapshot decodes, and that the log
          follows on from the newest snapshot; exits 1 naming the index of each
          problem (a torn tail left by a crash, which the next start drops, is
          reported but is no failure)

Run 'ctrlnode log dump --help' or 'ctrlnode log verify --help' for the flags.
`)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "dump":
		return runLogDump(args[1:], stdout, stderr)
	case "verify":
		return runLogVerify(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ctrlnode log: unknown subcommand %q (want dump or verify)\n", args[0])
	return exitUsage
}

func logFlags(name, doc string, stderr io.Writer) (*flag.FlagSet, *string, *bool) {
	fs := flag.NewFlagSet("log "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the voter's data directory (data.dir; voter-<id> under ctrlnode dev's --data)")
	asJSON := fs.Bool("json", false, "JSON output")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ctrlnode log %s --data-dir DIR [flags]\n\n%s\n\n", name, doc)
		fs.PrintDefaults()
	}
	return fs, dir, asJSON
}

func runLogDump(args []string, stdout, stderr io.Writer) int {
	fs, dir, asJSON := logFlags("dump", "Prints the records of a data directory's raft log and its snapshots, offline.", stderr)
	from := fs.Uint64("from", 0, "first log index to print")
	to := fs.Uint64("to", 0, "last log index to print (0: the end)")
	noSnaps := fs.Bool("no-snapshots", false, "leave the snapshots out")
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "ctrlnode log dump: --data-dir is required")
		return exitUsage
	}
	enc := json.NewEncoder(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !*noSnaps {
		snaps, err := datadir.Snapshots(*dir)
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode log dump: %v\n", err)
			return exitFailed
		}
		if !*asJSON && len(snaps) > 0 {
			fmt.Fprintln(tw, "SNAPSHOT\tINDEX\tTERM\tBYTES\tBROKERS\tTOPICS\tPARTITIONS\tSTATE HASH\tVOTERS")
		}
		for _, s := range snaps {
			if *asJSON {
				_ = enc.Encode(snapshotJSON(s))
				continue
			}
			hash := s.Hash.String()
			if s.Err != nil {
				hash = "error: " + s.Err.Error()
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.ID, s.Index, s.Term, s.Size, s.Brokers, s.Topics, s.Partitions, hash, servers(s.Servers))
		}
		if !*asJSON && len(snaps) > 0 {
			_ = tw.Flush()
			fmt.Fprintln(stdout)
		}
	}
	if !*asJSON {
		fmt.Fprintln(tw, "INDEX\tTERM\tTYPE\tRECORD\tFIELDS")
	}
	store, err := datadir.Entries(*dir, func(e datadir.Entry) error {
		if e.Index < *from || (*to != 0 && e.Index > *to) {
			return nil
		}
		if *asJSON {
			return enc.Encode(entryJSON(e))
		}
		row := func(record, fields string) {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", e.Index, e.Term, e.Type, record, fields)
		}
		switch {
		case e.Err != nil:
			row("-", "error: "+e.Err.Error())
		case e.Type == raft.LogConfiguration:
			row("-", "voters="+servers(e.Servers))
		case len(e.Records) == 0:
			row("-", "")
		}
		for _, r := range e.Records {
			row(r.Type().String(), datadir.FormatFields(datadir.RecordFields(r)))
		}
		return nil
	})
	_ = tw.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode log dump: %v\n", err)
		var d *logstore.DamageError
		if errors.As(err, &d) && d.Torn {
			return exitOK
		}
		return exitFailed
	}
	if store == "" && !*asJSON {
		fmt.Fprintf(stderr, "ctrlnode log dump: %s holds no raft log\n", *dir)
	}
	return exitOK
}

func runLogVerify(args []string, stdout, stderr io.Writer) int {
	fs, dir, asJSON := logFlags("verify", "Checks every checksum of a data directory's raft log and snapshots, and that every record decodes; exits 1 on a problem, naming its index.", stderr)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "ctrlnode log verify: --data-dir is required")
		return exitUsage
	}
	start := time.Now()
	r, err := datadir.Verify(*dir, func(index uint64) {
		fmt.Fprintf(stderr, "… read up to index %d (%s)\n", index, time.Since(start).Round(time.Millisecond))
	})
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode log verify: %v\n", err)
		return exitFailed
	}
	if *asJSON {
		problems := []map[string]any{}
		for _, p := range r.Problems {
			problems = append(problems, map[string]any{"index": p.Index, "snapshot": p.Snapshot, "error": p.Err.Error(), "warning": p.Warning})
		}
		_ = json.NewEncoder(stdout).Encode(map[string]any{"store": r.Store, "first_index": r.First, "last_index": r.Last,
			"entries": r.Entries, "records": r.Records, "snapshots": r.Snapshots, "problems": problems, "ok": !r.Failed()})
	} else {
		fmt.Fprintf(stdout, "%s: log in %s, %d entries (%d to %d), %d records, %d snapshots\n",
			*dir, orDash(r.Store), r.Entries, r.First, r.Last, r.Records, r.Snapshots)
		for _, p := range r.Problems {
			kind := "PROBLEM"
			if p.Warning {
				kind = "warning"
			}
			fmt.Fprintf(stdout, "%s: %s\n", kind, p)
		}
		if !r.Failed() {
			fmt.Fprintln(stdout, "ok")
		}
	}
	if r.Failed() {
		return exitFailed
	}
	return exitOK
}

func servers(ss []raft.Server) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s@%s", s.ID, s.Address)
		if s.Suffrage != raft.Voter {
			parts[i] += "(" + s.Suffrage.String() + ")"
		}
	}
	return strings.Join(parts, ",")
}

func entryJSON(e datadir.Entry) map[string]any {
	m := map[string]any{"index": e.Index, "term": e.Term, "type": e.Type.String(), "bytes": e.Bytes}
	if !e.AppendedAt.IsZero() {
		m["appended_at"] = e.AppendedAt.UTC().Format(time.RFC3339Nano)
	}
	if e.Err != nil {
		m["error"] = e.Err.Error()
	}
	if e.Type == raft.LogConfiguration && e.Err == nil {
		m["voters"] = servers(e.Servers)
	}
	if e.Type == raft.LogCommand && e.Err == nil {
		recs := []map[string]any{}
		for _, r := range e.Records {
			fields := map[string]any{}
			for _, f := range datadir.RecordFields(r) {
				fields[f.Name] = f.Value
			}
			recs = append(recs, map[string]any{"type": r.Type().String(), "fields": fields})
		}
		m["records"] = recs
	}
	return m
}

func snapshotJSON(s datadir.Snapshot) map[string]any {
	m := map[string]any{"snapshot": s.ID, "index": s.Index, "term": s.Term, "bytes": s.Size, "voters": servers(s.Servers),
		"brokers": s.Brokers, "topics": s.Topics, "partitions": s.Partitions}
	if s.Err != nil {
		m["error"] = s.Err.Error()
	} else {
		m["state_hash"] = s.Hash.String()
	}
	return m
}
