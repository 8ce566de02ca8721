package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// certSpec is one certificate to write.
type certSpec struct {
	file     string // base name without extension
	identity string // for the summary
	leaf     tlsconfig.Leaf
}

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
	days := fset.Int("days", 30, "validity in days")
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

	var specs []certSpec
	for _, id := range voterIDs {
		specs = append(specs, certSpec{file: "voter-" + strconv.Itoa(int(id)), identity: "voter " + strconv.Itoa(int(id)),
			leaf: tlsconfig.Leaf{CommonName: "voter-" + strconv.Itoa(int(id)), URIs: []*url.URL{tlsconfig.VoterURI(id)}, Hosts: hostList, Server: true, Client: true, Validity: validity}})
	}
	for _, id := range brokerIDs {
		specs = append(specs, certSpec{file: "broker-" + strconv.Itoa(int(id)), identity: "broker " + strconv.Itoa(int(id)),
			leaf: tlsconfig.Leaf{CommonName: "broker-" + strconv.Itoa(int(id)), URIs: []*url.URL{tlsconfig.BrokerURI(id)}, Hosts: hostList, Server: true, Client: true, Validity: validity}})
	}
	for _, p := range pairs {
		name := fmt.Sprintf("node-%d-%d", p.voter, p.broker)
		specs = append(specs, certSpec{file: name, identity: fmt.Sprintf("voter %d and broker %d", p.voter, p.broker),
			leaf: tlsconfig.Leaf{CommonName: name, URIs: []*url.URL{tlsconfig.VoterURI(p.voter), tlsconfig.BrokerURI(p.broker)}, Hosts: hostList, Server: true, Client: true, Validity: validity}})
	}
	for _, n := range clientNames {
		specs = append(specs, certSpec{file: "client-" + n, identity: "client User:" + n,
			leaf: tlsconfig.Leaf{CommonName: n, Client: true, Validity: validity}})
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
		return exitFailed
	}
	caCert, caKey := filepath.Join(*out, "ca.crt"), filepath.Join(*out, "ca.key")
	// Refuse before writing anything.
	var existing []string
	reuse := !*newCA && exists(caCert) && exists(caKey)
	if !reuse && (exists(caCert) || exists(caKey)) {
		existing = append(existing, caCert, caKey)
	}
	for _, s := range specs {
		for _, ext := range []string{".crt", ".key"} {
			if p := filepath.Join(*out, s.file+ext); exists(p) {
				existing = append(existing, p)
			}
		}
	}
	if len(existing) > 0 && !*force {
		names := make([]string, len(existing))
		for i, p := range existing {
			names[i] = filepath.Base(p)
		}
		fmt.Fprintf(stderr, "ctrlnode certs: %s already holds %s; pass --force to replace them\n", *out, strings.Join(names, ", "))
		return exitFailed
	}

	var ca *tlsconfig.CA
	if reuse {
		cp, err1 := os.ReadFile(caCert)
		kp, err2 := os.ReadFile(caKey)
		if err := errors.Join(err1, err2); err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
			return exitFailed
		}
		if ca, err = tlsconfig.LoadCA(cp, kp); err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %s: %v (pass --new-ca to make a new one)\n", *out, err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "using the CA in %s (valid until %s)\n", caCert, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	} else {
		if ca, err = tlsconfig.NewCA("ctrlquorum throwaway CA", validity); err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
			return exitFailed
		}
		if err := tlsconfig.WriteFileAtomic(caKey, ca.KeyPEM, 0o600); err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
			return exitFailed
		}
		if err := tlsconfig.WriteFileAtomic(caCert, ca.CertPEM, 0o644); err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "wrote %s and %s (new CA, valid until %s)\n", caCert, caKey, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, s := range specs {
		is, err := ca.Issue(s.leaf)
		if err == nil {
			_, err = is.Write(*out, s.file, caCert)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode certs: %s: %v\n", s.file, err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "wrote %-28s %s, valid until %s\n", filepath.Join(*out, s.file)+".{crt,key}", s.identity, is.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return exitOK
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
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
