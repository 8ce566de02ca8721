package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// formatSettings are the node settings format reads, from the same config
// file, environment and flags as run.
var formatSettings = []string{"node.id", "data.dir", "cluster.id", "raft.listener", "raft.advertised.listener"}

func runFormat(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "random-uuid" {
		return runRandomUUID(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the node's config file, as for run (node.id, data.dir, cluster.id and raft.listener are read from it)")
	vals := map[string]*string{}
	for _, k := range formatSettings {
		s := settingDoc(k)
		vals[k] = fs.String(server.FlagName(k), "", s)
	}
	initial := fs.String("initial-voters", "", "the voters a new cluster starts with, this node among them: a `LIST` ID@HOST:PORT:DIRECTORYID,… of raft addresses (directory ids from 'ctrlnode format random-uuid')")
	standalone := fs.Bool("standalone", false, "start a new cluster with this node as its only voter (at raft.advertised.listener, or raft.listener)")
	ignore := fs.Bool("ignore-formatted", false, "leave an already formatted directory as it is and succeed")
	asJSON := fs.Bool("json", false, "print what was written as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ctrlnode format [--config FILE] [--node-id N] [--data-dir DIR] [--cluster-id ID] [--initial-voters LIST | --standalone] [--ignore-formatted]")
		fmt.Fprintln(fs.Output(), "       ctrlnode format random-uuid")
		fmt.Fprint(fs.Output(), `
Writes a new node's identity into its data directory (meta.properties): the
cluster id, the node id, a new directory id and the format version. A node
refuses to start on a directory that is not formatted, or is formatted for
another node or cluster. Settings are read as run reads them (--config, the
CTRLNODE_ environment, flags).

  A new cluster: make a cluster id and one directory id per voter with
  'ctrlnode format random-uuid', then format every voter with the same
  --cluster-id and --initial-voters, e.g.
    ctrlnode format --config node.conf --cluster-id MkU3OEVBNTcwNTJENDM2Qg \
      --initial-voters 1001@10.0.0.1:9093:Xl9rEOEoRkSAi3lxfHTvIQ,1002@10.0.0.2:9093:…,1003@…
  A cluster of one voter: --standalone.
  A node joining a running quorum (a new voter, or one replacing a voter
  whose disk was lost): --cluster-id only. It never starts a quorum of its
  own; it waits to be added.

Without --cluster-id a new id is made (for the first node of a new cluster).
An already formatted directory is refused unless --ignore-formatted (then it
is kept), and so is one holding raft state written by a release without
meta.properties: run adopts that one on start.

`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	var fileVals server.SettingValues
	if *configPath != "" {
		var err error
		if fileVals, err = server.ParseSettingsFile(*configPath); err != nil {
			fmt.Fprintf(stderr, "ctrlnode format: invalid config: %v\n", err)
			return exitUsage
		}
	}
	flags := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, k := range formatSettings {
			if f.Name == server.FlagName(k) {
				flags[k] = *vals[k]
			}
		}
	})
	sv, err := server.ResolveSettings(fileVals, os.Environ(), flags)
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode format: invalid config: %v\n", err)
		return exitUsage
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ctrlnode format: "+format+"\n", a...)
		return exitUsage
	}
	id, err := strconv.ParseInt(sv.Get("node.id"), 10, 32)
	if sv.Get("node.id") == "" {
		return bad("%s: required", sv.Describe("node.id"))
	} else if err != nil || id < 0 {
		return bad("%s: %q is not a non-negative integer", sv.Describe("node.id"), sv.Get("node.id"))
	}
	dir := sv.Get("data.dir")
	if dir == "" {
		return bad("%s: required", sv.Describe("data.dir"))
	}
	opts := meta.FormatOptions{ClusterID: sv.Get("cluster.id"), NodeID: int32(id), IgnoreFormatted: *ignore}
	if opts.ClusterID != "" {
		if _, err := meta.ParseUUID(opts.ClusterID); err != nil {
			return bad("%s: %v (make one with `ctrlnode format random-uuid`)", sv.Describe("cluster.id"), err)
		}
	}
	switch {
	case *standalone && *initial != "":
		return bad("--standalone and --initial-voters are exclusive: a standalone node is the only initial voter")
	case *standalone:
		opts.Standalone = sv.Get("raft.advertised.listener")
		if opts.Standalone == "" {
			opts.Standalone = sv.Get("raft.listener")
		}
		if opts.Standalone == "" {
			return bad("--standalone: raft.listener (or raft.advertised.listener) is required: it is the address of the only voter")
		}
	case *initial != "":
		vs, err := meta.ParseVoters(*initial)
		if err != nil {
			return bad("--initial-voters: %v", err)
		}
		opts.InitialVoters = vs
	}
	p, err := meta.Format(dir, opts)
	switch {
	case errors.Is(err, meta.ErrFormatted):
		fmt.Fprintf(stderr, "ctrlnode format: %v\n(--ignore-formatted keeps it and succeeds; to start this node afresh, empty the directory first)\n", err)
		return exitFailed
	case errors.Is(err, meta.ErrHasRaftState):
		fmt.Fprintf(stderr, "ctrlnode format: %v: start it with `ctrlnode run`, which adopts it (writing its meta.properties)\n", err)
		return exitFailed
	case errors.Is(err, meta.ErrNotInitialVoter):
		return bad("--initial-voters: %v", err)
	case err != nil:
		fmt.Fprintf(stderr, "ctrlnode format: %v\n", err)
		return exitFailed
	}
	printFormatted(stdout, dir, p, *asJSON)
	return exitOK
}

func printFormatted(w io.Writer, dir string, p meta.Properties, asJSON bool) {
	if asJSON {
		voters := []string{}
		for _, v := range p.InitialVoters {
			voters = append(voters, v.String())
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"data_dir": dir, "version": p.Version, "cluster_id": p.ClusterID,
			"node_id": p.NodeID, "directory_id": p.DirectoryID.String(), "initial_voters": voters})
		return
	}
	fmt.Fprintf(w, "%s/%s:\n", strings.TrimRight(dir, "/"), meta.FileName)
	fmt.Fprintf(w, "  version         %d\n", p.Version)
	fmt.Fprintf(w, "  cluster.id      %s\n", p.ClusterID)
	fmt.Fprintf(w, "  node.id         %d\n", p.NodeID)
	fmt.Fprintf(w, "  directory.id    %s\n", p.DirectoryID)
	if len(p.InitialVoters) == 0 {
		fmt.Fprintln(w, "  initial.voters  none: this node joins a running quorum once it is added to it")
		return
	}
	fmt.Fprintf(w, "  initial.voters  %s\n", meta.FormatVoters(p.InitialVoters))
}

func runRandomUUID(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("format random-uuid", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1, "how many ids to print, one a line")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ctrlnode format random-uuid [-n COUNT]")
		fmt.Fprintln(fs.Output(), "\nPrints a new random Kafka Uuid (22 characters of URL-safe base64), for a cluster id or a directory id.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if *n < 1 || *n > 1000 {
		fmt.Fprintf(stderr, "ctrlnode format random-uuid: -n %d: want 1 to 1000\n", *n)
		return exitUsage
	}
	for range *n {
		fmt.Fprintln(stdout, meta.NewUUID())
	}
	return exitOK
}

func settingDoc(key string) string {
	for _, s := range server.Settings() {
		if s.Key == key {
			return s.Doc
		}
	}
	return ""
}
