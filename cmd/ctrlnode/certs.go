package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

var clientNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func runCerts(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("certs", flag.ContinueOnError)
	fset.SetOutput(stderr)
	out := fset.String("out", "./ctrlnode-certs", "folder to write the files to (created if missing)")
	voters := fset.String("voters", "1001,1002,1003", "voter ids to make certificates for (comma-separated, may be empty)")
	brokers := fset.String("brokers", "1,2,3", "broker ids to make certificates for (comma-separated, may be empty)")
	combined := fset.String("combined", "", "voter:broker id pairs for nodes with both roles, comma-separated (1001:1,1002:2): one certificate naming both ids each")
	clients := fset.String("clients", "admin", "client names to make certificates for (comma-separated, may be empty)")
	hosts := fset.String("hosts", "127.0.0.1,localhost", "DNS names and IP addresses the voter and broker certificates are valid for")
	days := fset.Int("days", int(tlsconfig.DefaultValidity/(24*time.Hour)), "validity in days")
	force := fset.Bool("force", false, "replace certificate files that already exist (a rotation: reload with SIGHUP)")
	newCA := fset.Bool("new-ca", false, "make a new CA even if --out holds one (with --force, replaces it)")
	fset.Usage = func() {
		w := fset.Output()
		fmt.Fprintln(w, "usage: ctrlnode certs [flags]")
		fmt.Fprint(w, `
Writes a throwaway certificate authority and certificates signed by it,
for a development or test cluster (bring your own PKI in production):

  ca.crt, ca.key              the CA (ca.crt is every node's CA bundle)
  voter-<id>.crt, .key        controller voter <id>: names ctrlquorum://voter/<id>
  broker-<id>.crt, .key       data broker <id>: names ctrlquorum://broker/<id>
  node-<v>-<b>.crt, .key      a node with both roles (--combined v:b): names both
  client-<name>.crt, .key     a client (CN <name>, principal User:<name>), no node id

Voter and broker certificates serve both ends of a connection (server and
client use) and are valid for --hosts; client certificates are for client
use only. Keys are ECDSA P-256, written with mode 0600.

When --out already holds ca.crt and ca.key, they sign the new certificates,
so a later run can add a broker (--voters '' --brokers 4 --clients '') or,
with --force, reissue one for a rotation; --new-ca makes a fresh CA.
Existing files are never replaced without --force.

flags:
`)
		fset.PrintDefaults()
	}
	if code, done := parseFlags(fset, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ctrlnode certs: "+format+"\n", a...)
		return exitUsage
	}
	voterIDs, err := parseIDList(*voters)
	if err != nil {
		return fail("--voters: %v", err)
	}
	brokerIDs, err := parseIDList(*brokers)
	if err != nil {
		return fail("--brokers: %v", err)
	}
	for _, v := range voterIDs {
		for _, b := range brokerIDs {
			if v == b {
				return fail("id %d is both a voter and a broker: voter and broker ids must be disjoint", v)
			}
		}
	}
	type pair struct{ voter, broker int32 }
	var pairs []pair
	for _, p := range splitList(*combined) {
		v, b, ok := strings.Cut(p, ":")
		vs, err1 := parseIDList(v)
		bs, err2 := parseIDList(b)
		if !ok || err1 != nil || err2 != nil || len(vs) != 1 || len(bs) != 1 {
			return fail("--combined: %q is not voter:broker (like 1001:1)", p)
		}
		if vs[0] == bs[0] {
			return fail("--combined: %q: voter and broker ids must differ", p)
		}
		pairs = append(pairs, pair{vs[0], bs[0]})
	}
	var clientNames []string
	for _, n := range splitList(*clients) {
		if !clientNameRE.MatchString(n) {
			return fail("--clients: %q is not a name (letters, digits, '.', '_', '-')", n)
		}
		clientNames = append(clientNames, n)
	}
	hostList := splitList(*hosts)
	if (len(voterIDs) > 0 || len(brokerIDs) > 0 || len(pairs) > 0) && len(hostList) == 0 {
		return fail("--hosts: voter and broker certificates need at least one host")
	}
	if *days <= 0 {
		return fail("--days must be positive")
	}
	validity := time.Duration(*days) * 24 * time.Hour

	pki := tlsconfig.DirPKI{Dir: *out, Validity: validity, NewCA: *newCA, Force: *force}
	for _, id := range voterIDs {
		pki.Leaves = append(pki.Leaves, tlsconfig.VoterLeaf(id, hostList, validity))
	}
	for _, id := range brokerIDs {
		pki.Leaves = append(pki.Leaves, tlsconfig.BrokerLeaf(id, hostList, validity))
	}
	for _, p := range pairs {
		pki.Leaves = append(pki.Leaves, tlsconfig.NodeLeaf(p.voter, p.broker, hostList, validity))
	}
	for _, n := range clientNames {
		pki.Leaves = append(pki.Leaves, tlsconfig.ClientLeaf(n, validity))
	}
	return issueCerts(pki, stdout, stderr)
}

// issueCerts issues pki's certificates, printing each file written.
func issueCerts(pki tlsconfig.DirPKI, stdout, stderr io.Writer) int {
	if err := pki.Issue(printWritten(stdout)); err != nil {
		fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// printWritten prints a line for each file a tlsconfig.DirPKI writes.
func printWritten(stdout io.Writer) func(tlsconfig.Written) {
	return func(w tlsconfig.Written) {
		until := w.NotAfter.UTC().Format(time.RFC3339)
		switch {
		case w.CA && w.Reused:
			fmt.Fprintf(stdout, "using the CA in %s (valid until %s)\n", w.Cert, until)
		case w.CA:
			fmt.Fprintf(stdout, "wrote %s and %s (new CA, valid until %s)\n", w.Cert, w.Key, until)
		default:
			fmt.Fprintf(stdout, "wrote %-28s %s, valid until %s\n", strings.TrimSuffix(w.Cert, ".crt")+".{crt,key}", w.Identity, until)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseIDList reads comma-separated non-negative int32 ids, no repeats.
func parseIDList(s string) ([]int32, error) {
	var out []int32
	seen := map[int32]bool{}
	for _, p := range splitList(s) {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a non-negative node id", p)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("id %d is listed twice", n)
		}
		seen[int32(n)] = true
		out = append(out, int32(n))
	}
	return out, nil
}
