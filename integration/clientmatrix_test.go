package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The client matrix: Kafka admin clients of several languages, none of
// them this project's own, run every admin operation they offer against
// `ctrlnode dev`, bootstrapped once at a broker and once at a voter, and
// log in with SASL against `dev --sasl` (SCRAM) and `dev --sasl --tls`
// (PLAIN). Each operation checks what it got back, not only that no error
// came; the outcome of each is one cell of a table, written to
// $CTRLQUORUM_CLIENT_MATRIX (default: a file in the test's temp folder) and
// logged. A cell that is not ok fails the test unless knownUnsupported
// names it, with the reason.

// The bootstrap kinds: a client is given a broker agent's address, or a
// voter's. No client here has Kafka's bootstrap.controllers (KIP-919,
// Java's admin client only): bootstrapped at a voter, each treats it as a
// bootstrap server and goes on to the brokers its Metadata lists.
const (
	kindBroker = "broker"
	kindVoter  = "voter"
)

var matrixKinds = []string{kindBroker, kindVoter}

// The operations, the rows of the table in this order. The external
// drivers (integration/clients/...) report results under these names.
const (
	opDescribeCluster      = "describe cluster"
	opCreateTopics         = "create topics"
	opListTopics           = "list topics"
	opDescribeTopics       = "describe topics"
	opAddPartitions        = "add partitions"
	opDescribeTopicConfigs = "describe topic configs"
	opAlterTopicIncr       = "alter topic configs (incremental)"
	opAlterTopicLegacy     = "alter topic configs (legacy)"
	opElectPreferred       = "elect preferred leaders"
	opElectUnclean         = "elect unclean leaders"
	opReassignStart        = "start reassignment"
	opReassignList         = "list reassignments"
	opReassignCancel       = "cancel reassignment"
	opCreateACLs           = "create ACLs"
	opDescribeACLs         = "describe ACLs"
	opDeleteACLs           = "delete ACLs"
	opUpsertSCRAM          = "upsert SCRAM users"
	opDescribeSCRAM        = "describe SCRAM users"
	opDeleteSCRAM          = "delete SCRAM users"
	opProduce              = "produce"
	opConsume              = "consume"
	opDeleteTopics         = "delete topics"

	opDescribeBroker       = "describe broker configs"
	opAlterBrokerIncr      = "alter broker configs (incremental)"
	opAlterBrokerLegacy    = "alter broker configs (legacy)"
	opDescribeDefault      = "describe cluster-default configs"
	opAlterDefaultIncr     = "alter cluster-default configs (incremental)"
	opAlterDefaultLegacy   = "alter cluster-default configs (legacy)"
	opLoginSCRAM256        = "login SCRAM-SHA-256"
	opLoginSCRAM512        = "login SCRAM-SHA-512"
	opLoginPlain           = "login PLAIN over TLS"
	opWrongPasswordSCRAM   = "wrong password refused (SCRAM-SHA-512)"
	opWrongPasswordPlain   = "wrong password refused (PLAIN over TLS)"
	opWrongPasswordSCRA256 = "wrong password refused (SCRAM-SHA-256)"
	opNoLogin              = "no login, nothing seen or done"
)

// The phases a client runs in. Topic-phase operations touch only names
// of the run's own (its topics), so every client and kind runs them at
// once against plain `dev`. Security-phase operations (ACLs, SCRAM
// users) run against `dev --sasl` logged in as its super user: ACLs are
// enforced as soon as one exists, and on plain `dev` the first one would
// deny its anonymous brokers their ClusterAction. Cluster-phase
// operations alter configs of the brokers and the cluster default that
// every run shares (a legacy AlterConfigs replaces a resource's whole
// set), so those runs go one at a time. Login-phase operations log in to
// `dev --sasl` with SCRAM and to `dev --sasl --tls` with PLAIN.
const (
	phaseTopics   = "topics"
	phaseSecurity = "security"
	phaseCluster  = "cluster"
	phaseLogin    = "login"
)

var matrixPhases = []string{phaseTopics, phaseSecurity, phaseCluster, phaseLogin}

var phaseOps = map[string][]string{
	phaseTopics: {opDescribeCluster, opCreateTopics, opListTopics, opDescribeTopics, opAddPartitions,
		opDescribeTopicConfigs, opAlterTopicIncr, opAlterTopicLegacy, opElectPreferred, opElectUnclean,
		opReassignStart, opReassignList, opReassignCancel, opProduce, opConsume, opDeleteTopics},
	phaseSecurity: {opCreateACLs, opDescribeACLs, opDeleteACLs, opUpsertSCRAM, opDescribeSCRAM, opDeleteSCRAM},
	phaseCluster: {opDescribeBroker, opAlterBrokerIncr, opAlterBrokerLegacy,
		opDescribeDefault, opAlterDefaultIncr, opAlterDefaultLegacy},
	phaseLogin: {opLoginSCRAM256, opLoginSCRAM512, opWrongPasswordSCRA256, opWrongPasswordSCRAM,
		opLoginPlain, opWrongPasswordPlain, opNoLogin},
}

// matrixRows is every operation in table order.
func matrixRows() []string {
	var rows []string
	for _, p := range matrixPhases {
		rows = append(rows, phaseOps[p]...)
	}
	return rows
}

// matrixConfigKey is the broker config the cluster-phase operations set,
// per broker and as the cluster default: one the controller does not act
// on, dynamic in Kafka at both levels.
const matrixConfigKey = "log.retention.ms"

// matrixRun is what one client run is told; the external drivers get it
// as JSON, their only argument.
type matrixRun struct {
	Phase     string  `json:"phase"`
	Kind      string  `json:"kind"`
	Bootstrap string  `json:"bootstrap"`
	Prefix    string  `json:"prefix"`  // names of this run's topics, principal and SCRAM user start with it
	Brokers   []int32 `json:"brokers"` // the cluster's broker ids
	ConfigKey string  `json:"config_key"`
	// The mechanisms to log in with (the login phase tries each; the
	// others log in with the first), the user and its password;
	// LoginTopic is a topic the login phase must list.
	Mechanisms []string `json:"mechanisms,omitempty"`
	User       string   `json:"user,omitempty"`
	Password   string   `json:"password,omitempty"`
	LoginTopic string   `json:"login_topic,omitempty"`
	// TLS files, when the cluster runs mutual TLS.
	TLSCA   string `json:"tls_ca,omitempty"`
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
}

// opResult is one operation's outcome: Err empty when it did what it
// should and its result checked out.
type opResult struct {
	Op  string `json:"op"`
	Err string `json:"err"`
}

// matrixClient is one client library and the operations it offers; run
// runs one phase and returns a result per operation it did. An offered
// operation without a result counts as failed.
type matrixClient struct {
	name   string
	offers []string
	need   func(t *testing.T) // ends the test (testkit.Need) when the client is not installed
	run    func(ctx context.Context, t *testing.T, r matrixRun) []opResult
}

func (c matrixClient) offersOp(op string) bool { return slices.Contains(c.offers, op) }

// knownUnsupported lists the cells expected not to work yet, by
// "client|operation|kind" (kind * for both), with the reason. They stay in
// the table, marked, and do not fail the test; every other cell must be ok.
var knownUnsupported = map[string]string{}

// knownFor adds reason for every client in clients and op in ops (kind
// *: both kinds), after any reason the cell has already.
func knownFor(reason string, clients, ops []string, kind string) {
	for _, c := range clients {
		for _, op := range ops {
			k := c + "|" + op + "|" + kind
			if r, ok := knownUnsupported[k]; ok {
				knownUnsupported[k] = r + "; " + reason
			} else {
				knownUnsupported[k] = reason
			}
		}
	}
}

// The reasons of the cells known not to work yet.
const (
	knownNoGroups      = "no group coordinator (FindCoordinator, JoinGroup): kafkajs consumes in a consumer group only"
	knownVoterAsBroker = "bootstrapped at a voter, kafkajs's idempotent producer still sends its InitProducerId to the voter, which serves no broker request (API not supported), though the voter's Metadata lists the brokers only"
)

func init() {
	knownFor(knownNoGroups, []string{"kafkajs"}, []string{opConsume}, "*")
	knownFor(knownVoterAsBroker, []string{"kafkajs"}, []string{opProduce, opConsume}, kindVoter)
}

// knownReason returns why a cell is known not to work, if it is.
func knownReason(client, op, kind string) (string, bool) {
	var rs []string
	for _, k := range []string{kind, "*"} {
		if r, ok := knownUnsupported[client+"|"+op+"|"+k]; ok {
			rs = append(rs, r)
		}
	}
	return strings.Join(rs, "; "), len(rs) > 0
}

// matrixCluster is a running `ctrlnode dev`.
type matrixCluster struct {
	name     string
	proc     *proc
	brokers  []string // broker agents' Kafka addresses, broker 1 first
	voters   []string // voters' Kafka addresses
	dataDir  string
	password string // the admin user's, with --sasl
	pwFile   string // the file ctrlnode dev keeps it in
	tlsDir   string // with --tls
}

// matrixPortStride separates the port ranges of the matrix's clusters:
// a dev cluster takes its base port and up to 302 above it.
const matrixPortStride = 400

// matrixPortBase returns a base port with n dev clusters' ports free
// above it, matrixPortStride apart. Chosen at once, before any of them
// starts: ranges chosen one by one could overlap while the first cluster
// has not bound its ports yet.
func matrixPortBase(t *testing.T, n int) int {
	var offsets []int
	for i := 0; i < n; i++ {
		for _, off := range devPorts {
			offsets = append(offsets, i*matrixPortStride+off)
		}
	}
	return freePortBase(t, offsets...)
}

// startMatrixCluster starts `ctrlnode dev` with flags at port base;
// ready waits for it.
func startMatrixCluster(t *testing.T, name string, base int, flags ...string) *matrixCluster {
	t.Helper()
	data := t.TempDir()
	args := append([]string{"dev", "--data", data, "--port", strconv.Itoa(base), "--log-level", "warn", "--session-timeout", "3s"}, flags...)
	c := &matrixCluster{name: name, dataDir: data, proc: startProc(t, name, nil, args...)}
	for i := 0; i < 3; i++ {
		c.voters = append(c.voters, fmt.Sprintf("127.0.0.1:%d", base+i))
		c.brokers = append(c.brokers, fmt.Sprintf("127.0.0.1:%d", base+300+i))
	}
	if slices.Contains(flags, "--sasl") {
		c.password = "pending"
	}
	if slices.Contains(flags, "--tls") {
		c.tlsDir = filepath.Join(data, "tls")
	}
	return c
}

// ctlArgs are the bootstrap, TLS and login flags of ctrlnode's admin
// commands for this cluster.
func (c *matrixCluster) ctlArgs() []string {
	a := []string{"--bootstrap", c.voters[0], "--timeout", "20s"}
	if c.tlsDir != "" {
		a = append(a, "--tls-ca", filepath.Join(c.tlsDir, "ca.crt"),
			"--tls-cert", filepath.Join(c.tlsDir, "client-admin.crt"), "--tls-key", filepath.Join(c.tlsDir, "client-admin.key"))
	}
	if c.password != "" {
		a = append(a, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin",
			"--sasl-password-file", c.pwFile)
	}
	return a
}

// run is a matrixRun of phase against this cluster, bootstrapped at
// the i%3-th node of kind, as admin when the cluster has SASL.
func (c *matrixCluster) run(phase, kind string, i int, prefix string) matrixRun {
	r := matrixRun{Phase: phase, Kind: kind, Bootstrap: c.voters[i%3], Prefix: prefix,
		Brokers: []int32{1, 2, 3}, ConfigKey: matrixConfigKey}
	if kind == kindBroker {
		r.Bootstrap = c.brokers[i%3]
	}
	if c.password != "" {
		r.User, r.Password = "admin", c.password
	}
	if c.tlsDir != "" {
		r.TLSCA = filepath.Join(c.tlsDir, "ca.crt")
		r.TLSCert = filepath.Join(c.tlsDir, "client-admin.crt")
		r.TLSKey = filepath.Join(c.tlsDir, "client-admin.key")
	}
	return r
}

// loginOpOf reports whether op is a login-phase row of a run with mechs.
func loginOpOf(op string, mechs []string) bool {
	if op == opNoLogin {
		// Tried against dev --sasl, the run of its SCRAM mechanisms.
		return slices.Contains(mechs, "SCRAM-SHA-512")
	}
	for _, m := range mechs {
		if op == loginOp(m) || op == wrongPasswordOp(m) {
			return true
		}
	}
	return false
}

// ready waits for an active controller and three active brokers, and
// reads the admin password of a --sasl cluster.
func (c *matrixCluster) ready(t *testing.T) {
	t.Helper()
	c.proc.waitLine(t, activeRE, 2*time.Minute)
	if c.password != "" {
		m := c.proc.waitLine(t, regexp.MustCompile(`^SASL: .* password is in (\S+)$`), time.Second)
		b, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		c.password = strings.TrimSpace(string(b))
		c.pwFile = m[1]
	}
	var brokers brokersJSON
	waitFor(t, 2*time.Minute, c.name+": three active brokers", func() bool {
		ctlJSON(t, time.Minute, &brokers, append([]string{"brokers", "list"}, c.ctlArgs()...)...)
		active := 0
		for _, br := range brokers.Brokers {
			if br.State == "active" && !br.Fenced {
				active++
			}
		}
		return active == 3
	})
}

// matrixCell is one outcome: client × operation × bootstrap kind.
type matrixCell struct {
	client, op, kind string
	err              string // "" ok
}

func TestClientMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and the clients")
	}
	t.Parallel()
	clients := matrixClients()
	for _, c := range clients {
		c.need(t)
	}
	base := matrixPortBase(t, 3)
	plain := startMatrixCluster(t, "dev", base)
	scram := startMatrixCluster(t, "dev --sasl", base+matrixPortStride, "--sasl")
	plainTLS := startMatrixCluster(t, "dev --sasl --tls", base+2*matrixPortStride, "--sasl", "--tls")
	for _, c := range []*matrixCluster{plain, scram, plainTLS} {
		c.ready(t)
	}

	// The topic a login must list.
	const loginTopic = "matrix-login"
	for _, c := range []*matrixCluster{scram, plainTLS} {
		prepareLoginCluster(t, c, loginTopic)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		cells []matrixCell
	)
	record := func(c matrixClient, phase, kind string, mechs []string, res []opResult, runErr error) {
		mu.Lock()
		defer mu.Unlock()
		got := map[string]string{}
		for _, r := range res {
			got[r.Op] = r.Err
		}
		if e, ok := got[runErrorOp]; ok && runErr == nil {
			runErr = errors.New(e)
		}
		for _, op := range phaseOps[phase] {
			if !c.offersOp(op) || (phase == phaseLogin && !loginOpOf(op, mechs)) {
				continue
			}
			e, ok := got[op]
			if !ok {
				e = "no result"
				if runErr != nil {
					e += ": " + runErr.Error()
				}
			}
			cells = append(cells, matrixCell{client: c.name, op: op, kind: kind, err: e})
		}
	}
	// run runs phase of client c (the i-th) bootstrapped at a kind of
	// node of cl, logging in with mechs as admin when given, and records
	// it. At most three runs go at a time: the race-built voters of three
	// clusters share the machine with them, and a voter starved of CPU
	// misses its raft heartbeats.
	slots := make(chan struct{}, 3)
	run := func(i int, c matrixClient, kind, phase string, cl *matrixCluster, mechs ...string) {
		slots <- struct{}{}
		defer func() { <-slots }()
		r := cl.run(phase, kind, i, fmt.Sprintf("m-%s-%s", c.name, kind))
		r.Mechanisms, r.LoginTopic = mechs, loginTopic
		start := time.Now()
		res, err := c.runSafe(ctx, t, r)
		t.Logf("%s@%s %s phase %v: %d results in %v", c.name, kind, phase, mechs, len(res), time.Since(start).Round(time.Millisecond))
		record(c, phase, kind, mechs, res, err)
	}

	// Every phase but the cluster one runs for every client and kind at once.
	var wg sync.WaitGroup
	for i, c := range clients {
		for _, kind := range matrixKinds {
			wg.Add(3)
			go func() { defer wg.Done(); run(i, c, kind, phaseTopics, plain) }()
			go func() { defer wg.Done(); run(i, c, kind, phaseSecurity, scram, "SCRAM-SHA-512") }()
			go func() { defer wg.Done(); run(i, c, kind, phaseLogin, scram, "SCRAM-SHA-256", "SCRAM-SHA-512") }()
			wg.Add(1)
			go func() { defer wg.Done(); run(i, c, kind, phaseLogin, plainTLS, "PLAIN") }()
		}
	}
	wg.Wait()
	for i, c := range clients {
		for _, kind := range matrixKinds {
			if slices.ContainsFunc(phaseOps[phaseCluster], c.offersOp) {
				run(i, c, kind, phaseCluster, plain)
			}
		}
	}

	table, failed := renderMatrix(clients, cells)
	// Controllers elected after the first: a failover during the run
	// explains a client's retried request.
	var elected []string
	for _, c := range []*matrixCluster{plain, scram, plainTLS} {
		elected = append(elected, fmt.Sprintf("%s %d", c.name, c.proc.count(activeRE)-1))
	}
	table += "controller failovers during the run: " + strings.Join(elected, ", ") + "\n"
	out := os.Getenv("CTRLQUORUM_CLIENT_MATRIX")
	if out == "" {
		out = filepath.Join(t.TempDir(), "client-matrix.txt")
	}
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing the matrix: %v", err)
	}
	t.Logf("client matrix (also in %s):\n%s", out, table)
	for _, f := range failed {
		t.Errorf("%s, %s, bootstrapped at a %s: %s", f.client, f.op, f.kind, f.err)
	}
}

// runSafe runs a client, turning a panic of its run into an error.
func (c matrixClient) runSafe(ctx context.Context, t *testing.T, r matrixRun) (res []opResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v", c.name, p)
		}
	}()
	return c.run(ctx, t, r), nil
}

// renderMatrix returns the table (a grid of ok / FAIL / known / blank for
// an operation the client does not offer, then every cell that is not ok
// with its error) and the cells that fail the test.
func renderMatrix(clients []matrixClient, cells []matrixCell) (string, []matrixCell) {
	byKey := map[string]matrixCell{}
	for _, c := range cells {
		byKey[c.client+"|"+c.op+"|"+c.kind] = c
	}
	var cols []string
	for _, c := range clients {
		for _, k := range matrixKinds {
			cols = append(cols, c.name+"@"+k)
		}
	}
	rows := matrixRows()
	w := 0
	for _, r := range rows {
		w = max(w, len(r))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", w, "operation")
	for _, c := range cols {
		fmt.Fprintf(&b, " | %-15s", c)
	}
	b.WriteString("\n")
	var notes []string
	var failed []matrixCell
	for _, op := range rows {
		fmt.Fprintf(&b, "%-*s", w, op)
		for _, c := range clients {
			for _, k := range matrixKinds {
				cell, ok := byKey[c.name+"|"+op+"|"+k]
				mark := ""
				switch {
				case !ok:
					mark = "-"
				case cell.err == "":
					mark = "ok"
					if reason, known := knownReason(c.name, op, k); known {
						mark = "ok (was known)"
						notes = append(notes, fmt.Sprintf("%s@%s %s: ok, though listed as known-not-supported (%s)", c.name, k, op, reason))
					}
				default:
					if reason, known := knownReason(c.name, op, k); known {
						mark = "known"
						notes = append(notes, fmt.Sprintf("%s@%s %s: KNOWN NOT SUPPORTED (%s): %s", c.name, k, op, reason, cell.err))
					} else {
						mark = "FAIL"
						failed = append(failed, cell)
						notes = append(notes, fmt.Sprintf("%s@%s %s: FAIL: %s", c.name, k, op, cell.err))
					}
				}
				fmt.Fprintf(&b, " | %-15s", mark)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n- : the client does not offer the operation\n")
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	return b.String(), failed
}
