package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Exit codes of the admin commands (see usage).
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitNotYet      = 4
)

// defaultBootstrap is dev mode's first voter: the admin commands'
// controller when neither --bootstrap nor --bootstrap-controller is given.
const defaultBootstrap = "127.0.0.1:19092"

// defaultHTTP are dev mode's HTTP endpoints, used when the bootstrap
// names dev mode's voters or brokers (or is the default) and --http is
// not given.
var defaultHTTP = []string{"127.0.0.1:19292", "127.0.0.1:19293", "127.0.0.1:19294"}

// devListeners are dev mode's Kafka listeners: the voters', then the
// brokers'.
var devListeners = []string{"127.0.0.1:19092", "127.0.0.1:19093", "127.0.0.1:19094", "127.0.0.1:19392", "127.0.0.1:19393", "127.0.0.1:19394"}

// devBootstrap reports whether the bootstrap addresses are dev mode's.
func (c *cli) devBootstrap() bool {
	for _, a := range strings.Split(c.bootstrap, ",") {
		if !slices.Contains(devListeners, strings.TrimSpace(a)) {
			return false
		}
	}
	return true
}

// listFlag is a flag that may be repeated; each value may also hold a
// comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// cli is what every admin command shares: its flags, its output, and its
// client.
type cli struct {
	name   string // "topics create"
	fs     *flag.FlagSet
	stdout io.Writer
	stderr io.Writer
	// bootstrap and bootstrapController are the flags of the same names;
	// parse leaves the chosen list in bootstrap and says which in
	// viaBrokers.
	bootstrap           string
	bootstrapController string
	viaBrokers          bool
	json                bool
	timeout             time.Duration
	tlsFiles            tlsconfig.Files
	tlsDial             kafkaclient.DialFunc // set by tlsDialer once loaded
	saslFlags           saslFlags
	saslMech            kgosasl.Mechanism       // set by saslMechanism once checked
	ctl                 *kafkaclient.Controller // set by controller on first use
}

// newCLI makes the flag set of an admin command with the common flags.
// synopsis is the usage line's arguments; about follows it.
func newCLI(name, synopsis, about string, stdout, stderr io.Writer) *cli {
	c := &cli{name: name, stdout: stdout, stderr: stderr}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(stderr)
	c.fs.StringVar(&c.bootstrap, "bootstrap", "", "host:port of brokers (comma-separated for several), as Kafka's --bootstrap-server: requests go to a broker, which forwards what only the controller answers")
	c.fs.StringVar(&c.bootstrapController, "bootstrap-controller", "", "host:port of controller voters (comma-separated for several), as Kafka's --bootstrap-controller: requests go to the active controller (default, without --bootstrap: dev mode's "+defaultBootstrap+")")
	c.fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	c.fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	c.fs.StringVar(&c.tlsFiles.CA, "tls-ca", "", "CA bundle (PEM) of a cluster that runs TLS; with --tls-cert and --tls-key for mutual TLS, alone for a SASL login over TLS")
	c.fs.StringVar(&c.tlsFiles.Cert, "tls-cert", "", "client certificate (PEM), e.g. client-admin.crt of `ctrlnode certs`")
	c.fs.StringVar(&c.tlsFiles.Key, "tls-key", "", "private key (PEM) of --tls-cert")
	c.addSASLFlags()
	c.fs.Usage = func() {
		w := c.fs.Output()
		fmt.Fprintf(w, "usage: ctrlnode %s %s\n", name, synopsis)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(about))
		}
		fmt.Fprintln(w, "\nflags:")
		c.fs.PrintDefaults()
	}
	return c
}

// parse parses args; done reports that the command should return code
// (help was printed, or the flags were wrong).
func (c *cli) parse(args []string) (code int, done bool) {
	if code, done := parseFlags(c.fs, args, c.stdout); done {
		return code, done
	}
	switch {
	case c.bootstrap != "" && c.bootstrapController != "":
		return c.fail(usageErr("give --bootstrap (brokers) or --bootstrap-controller (controller voters), not both")), true
	case c.bootstrap != "":
		c.viaBrokers = true
	case c.bootstrapController != "":
		c.bootstrap = c.bootstrapController
	default:
		c.bootstrap = defaultBootstrap
	}
	// The TLS files and the SASL password are read once, before any
	// connection.
	if _, err := c.tlsDialer(); err != nil {
		return c.fail(err), true
	}
	if _, err := c.saslMechanism(); err != nil {
		return c.fail(err), true
	}
	return 0, false
}

// parseFlags parses a flag set; --help prints the usage on stdout and
// exits 0, a bad flag prints the error and usage on the set's output and
// exits 2. Positional arguments are refused.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (int, bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(stdout)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "ctrlnode %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}

// httpAddrs returns the HTTP endpoints to read: --http, or dev mode's when
// the bootstrap is dev mode's.
func (c *cli) httpAddrs(flagVal listFlag) []string {
	if len(flagVal) > 0 {
		return flagVal
	}
	if c.devBootstrap() {
		return defaultHTTP
	}
	return nil
}

// tlsDialer returns the TLS dialler of --tls-ca/--tls-cert/--tls-key, or
// nil when none is given (plain TCP). The server's certificate is
// verified against the CA bundle and the host name dialled. --tls-ca
// alone presents no client certificate: the client then logs in with
// SASL.
func (c *cli) tlsDialer() (kafkaclient.DialFunc, error) {
	if c.tlsDial != nil {
		return c.tlsDial, nil
	}
	f := c.tlsFiles
	if f.CA == "" && f.Cert == "" && f.Key == "" {
		return nil, nil
	}
	if f.Cert == "" && f.Key == "" {
		dial, err := caOnlyDialer(f.CA)
		if err != nil {
			return nil, err
		}
		c.tlsDial = dial
		return c.tlsDial, nil
	}
	// A client certificate needs its key and the CA of the servers.
	switch {
	case f.Cert == "":
		return nil, usageErr("--tls-cert is required with --tls-key")
	case f.Key == "":
		return nil, usageErr("--tls-key is required with --tls-cert")
	case f.CA == "":
		return nil, usageErr("--tls-ca is required with --tls-cert and --tls-key")
	}
	r, err := tlsconfig.NewReloader(f, tlsconfig.Options{})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	c.tlsDial = r.Dialer(&net.Dialer{}, nil)
	return c.tlsDial, nil
}

func (c *cli) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// fail reports err and returns its exit code.
func (c *cli) fail(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %v\n", c.name, err)
		return exitUsage
	}
	if saslLoginRefused(err) {
		fmt.Fprintf(c.stderr, "ctrlnode %s: login refused: %v\n", c.name, err)
		return exitFailed
	}
	if unreachable(err) {
		fmt.Fprintf(c.stderr, "ctrlnode %s: cannot reach the cluster at %s: %v\n", c.name, c.bootstrap, err)
		if c.saslMech == nil && strings.Contains(err.Error(), "EOF") {
			// A listener that requires SASL closes the connection on the
			// first request of a client that did not log in.
			fmt.Fprintf(c.stderr, "ctrlnode %s: the listener closed the connection; if the cluster requires a login, give --sasl-mechanism, --sasl-user and --sasl-password-file\n", c.name)
		}
		return exitUnreachable
	}
	fmt.Fprintf(c.stderr, "ctrlnode %s: %v\n", c.name, err)
	return exitFailed
}

func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED)
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// table writes rows aligned in columns.
func (c *cli) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// itemError renders a per-item error for output: "" for none, else the
// Kafka error name and message.
func itemError(err error, msg string) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if msg == "" || !errors.As(err, &ke) {
		if msg != "" {
			return err.Error() + ": " + msg
		}
		return err.Error()
	}
	if strings.HasPrefix(msg, ke.Message) {
		return msg
	}
	return ke.Message + ": " + msg
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// timeoutMillis is --timeout as a request's TimeoutMillis, at most 5
// minutes.
func (c *cli) timeoutMillis() int32 { return int32(min(c.timeout, 5*time.Minute).Milliseconds()) }

// isCode reports whether err is the Kafka error e.
func isCode(err error, e *kerr.Error) bool { return errors.Is(err, e) }

func ints(s []int32) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// subcommand dispatches `ctrlnode <group> <sub>`.
type subcommand struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func dispatch(group, about string, subs []subcommand, args []string, stdout, stderr io.Writer) int {
	help := func(w io.Writer) {
		fmt.Fprintf(w, "usage: ctrlnode %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", group, about)
		for _, s := range subs {
			fmt.Fprintf(w, "  %-15s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(w, "\nRun 'ctrlnode %s <subcommand> --help' for its flags.\n", group)
	}
	if len(args) == 0 {
		help(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		help(stdout)
		return exitOK
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "ctrlnode %s: unknown subcommand %q\n\n", group, args[0])
	help(stderr)
	return exitUsage
}

// partitionSpec is topic:partition.
type partitionSpec struct {
	Topic     string
	Partition int32
}

func parsePartitionSpecs(specs []string) ([]partitionSpec, error) {
	var out []partitionSpec
	for _, s := range specs {
		i := strings.LastIndexByte(s, ':')
		if i <= 0 {
			return nil, usageErr("%q is not topic:partition", s)
		}
		p, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil || p < 0 {
			return nil, usageErr("%q: partition %q is not a non-negative integer", s, s[i+1:])
		}
		out = append(out, partitionSpec{s[:i], int32(p)})
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
