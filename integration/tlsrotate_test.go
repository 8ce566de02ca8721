package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// setting returns the value of key in a node's settings.
func setting(t *testing.T, settings [][2]string, key string) string {
	t.Helper()
	for _, kv := range settings {
		if kv[0] == key {
			return kv[1]
		}
	}
	t.Fatalf("no setting %s", key)
	return ""
}

// fileLeaf reads the first certificate of a PEM file.
func fileLeaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// matching returns the lines p printed that match re.
func (p *proc) matching(re *regexp.Regexp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// cliLoad runs `ctrlnode topics create` commands one after another until
// stopped, each a new process with new TLS connections, and keeps their
// outcomes.
type cliLoad struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	calls  int
	acked  []string
	failed []string
}

func startCLILoad(bin string, boots []string, tlsArgs []string) *cliLoad {
	l := &cliLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			name := fmt.Sprintf("load-%d", i)
			// Each node's listener in turn takes the first connection.
			args := append([]string{"topics", "create", "--topic", name, "--partitions", "1", "--replication-factor", "3",
				"--bootstrap", boots[i%len(boots)], "--timeout", "20s", "--json"}, tlsArgs...)
			cmd := exec.Command(bin, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var res itemResults
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &res)
			}
			if err == nil && (len(res.Results) != 1 || res.Results[0].Status != "created" || res.Results[0].Error != "") {
				err = fmt.Errorf("result %+v", res.Results)
			}
			l.mu.Lock()
			l.calls++
			if err != nil {
				l.failed = append(l.failed, fmt.Sprintf("create %s: %v\nstdout:\n%s\nstderr:\n%s", name, err, out.String(), errb.String()))
			} else {
				l.acked = append(l.acked, name)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *cliLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// halt stops the load after the command running now.
func (l *cliLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// topicsOn returns the topics the node at addr lists in a Metadata answer
// of its own (not one of another node the client found through it).
func topicsOn(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (map[string]bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.Dialer(dial))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
		if tp.Topic != nil && tp.ErrorCode == 0 {
			out[*tp.Topic] = true
		}
	}
	return out, nil
}

// TestRunTLSRotateOnSIGHUP runs three `ctrlnode run` nodes (voter and
// broker each) over mutual TLS with certificates of `ctrlnode certs`, and
// `ctrlnode topics create` commands one after another throughout. The
// node certificates are reissued by the same CA over the files (`certs
// --force`) and each node gets SIGHUP: each logs the reload, new TLS
// connections to its listener, broker listener and raft listener see the
// new certificate, and no command failed. Then a certificate with a key
// that does not match it is written over each node's files: SIGHUP is
// refused with a log line and the node keeps serving the certificate it
// had. Every acknowledged topic, and one more created afterwards, is
// listed by every node, and after the active controller stops, another
// voter takes over and commits.
func TestRunTLSRotateOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := ctrlnode(t)
	all, nodes, dir := threeNodeSettings(t)
	certDir := filepath.Join(dir, "tls")
	const combined = "1001:1,1002:2,1003:3"
	issueNodeCerts := func(extra ...string) {
		t.Helper()
		r := ctl(t, nil, append([]string{"certs", "--out", certDir, "--voters", "", "--brokers", "", "--combined", combined}, extra...)...)
		if r.code != 0 {
			t.Fatalf("ctrlnode certs: %v", r)
		}
	}
	issueNodeCerts("--clients", "admin", "--days", "1")
	caFile := filepath.Join(certDir, "ca.crt")
	certFile := func(i int) string { return filepath.Join(certDir, fmt.Sprintf("node-%d-%d.crt", 1001+i, i+1)) }
	keyFile := func(i int) string { return filepath.Join(certDir, fmt.Sprintf("node-%d-%d.key", 1001+i, i+1)) }
	for i := range nodes {
		settings := append(all[i], [2]string{"tls.ca.file", caFile}, [2]string{"tls.cert.file", certFile(i)}, [2]string{"tls.key.file", keyFile(i)})
		nodes[i].args = append(nodes[i].args, "--config", configFile(t, dir, nodes[i].id, settings))
	}
	procs := make([]*proc, len(nodes))
	for i, n := range nodes {
		procs[i] = n.start(t)
	}

	adminFiles := tlsconfig.Files{CA: caFile, Cert: filepath.Join(certDir, "client-admin.crt"), Key: filepath.Join(certDir, "client-admin.key")}
	tlsArgs := []string{"--tls-ca", adminFiles.CA, "--tls-cert", adminFiles.Cert, "--tls-key", adminFiles.Key}
	// The test's own TLS clients hold their material in memory: the admin
	// certificate for the listeners, node 1001's first certificate for the
	// raft listeners, which take voters only.
	admin, err := tlsconfig.NewReloader(adminFiles, tlsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := tlsconfig.NewReloader(tlsconfig.Files{CA: caFile, Cert: certFile(0), Key: keyFile(0)}, tlsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	voterIDs := tlsconfig.Voters(1001, 1002, 1003)
	// servedSerials are the serial numbers node i presents on new
	// connections to its three listeners.
	servedSerials := func(i int) []string {
		t.Helper()
		return []string{
			tlstest.Presented(t, nodes[i].listener, admin.ClientConfig("127.0.0.1", nil)).SerialNumber.String(),
			tlstest.Presented(t, setting(t, all[i], "broker.listener"), admin.ClientConfig("127.0.0.1", nil)).SerialNumber.String(),
			tlstest.Presented(t, setting(t, all[i], "raft.listener"), peer.ClientConfig("", voterIDs)).SerialNumber.String(),
		}
	}
	expectServed := func(i int, want, why string) {
		t.Helper()
		for j, got := range servedSerials(i) {
			if got != want {
				t.Fatalf("node %d, %s listener: serial %s on a new connection, want %s (%s)",
					nodes[i].id, []string{"client", "broker", "raft"}[j], got, want, why)
			}
		}
	}

	boot := bootstrapOf(nodes)
	waitFor(t, time.Minute, "three active brokers", func() bool {
		var b brokersJSON
		ctlJSON(t, 30*time.Second, &b, append([]string{"brokers", "list", "--bootstrap", boot}, tlsArgs...)...)
		active := 0
		for _, x := range b.Brokers {
			if !x.Fenced {
				active++
			}
		}
		return active == 3
	})
	first := make([]string, len(nodes))
	for i := range nodes {
		first[i] = fileLeaf(t, certFile(i)).SerialNumber.String()
		expectServed(i, first[i], "before any reload")
	}

	var boots []string
	for _, n := range nodes {
		boots = append(boots, n.listener)
	}
	load := startCLILoad(bin, boots, tlsArgs)
	t.Cleanup(load.halt)
	// progress waits for n more commands of the load to finish, so that
	// each step below has commands before and after it.
	progress := func(n int, after string) {
		t.Helper()
		from := load.count()
		waitFor(t, time.Minute, fmt.Sprintf("%d more commands of the load after %s", n, after), func() bool { return load.count() >= from+n })
	}
	progress(2, "the start")

	// Rotation: new certificates of the same CA over the files; the
	// nodes keep the old ones until told.
	issueNodeCerts("--clients", "", "--force")
	rotated := make([]string, len(nodes))
	for i := range nodes {
		rotated[i] = fileLeaf(t, certFile(i)).SerialNumber.String()
		if rotated[i] == first[i] {
			t.Fatalf("ctrlnode certs --force left node %d's certificate as it was", nodes[i].id)
		}
	}
	progress(1, "writing the new certificates")
	for i := range nodes {
		expectServed(i, first[i], "new files, no SIGHUP yet")
	}

	for i, p := range procs {
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		p.waitLine(t, regexp.MustCompile(`ctrlnode\.tls: reloaded TLS certificate: .*serial=`+rotated[i]+`( |$)`), 30*time.Second)
		p.waitLine(t, regexp.MustCompile(`ctrlnode: SIGHUP: TLS certificate reloaded: (listener=\S+ )?cert=`+regexp.QuoteMeta(certFile(i))+` `), 30*time.Second)
		expectServed(i, rotated[i], "after SIGHUP")
		progress(1, fmt.Sprintf("node %d's reload", nodes[i].id))
	}

	// A bad reload: each node's files get a new certificate with another
	// node's key. SIGHUP is refused and the node keeps what it had.
	issueNodeCerts("--clients", "", "--force")
	keys := make([][]byte, len(nodes))
	for i := range nodes {
		if keys[i], err = os.ReadFile(keyFile(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nodes {
		if err := tlsconfig.WriteFileAtomic(keyFile(i), keys[(i+1)%len(nodes)], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		m := p.waitLine(t, regexp.MustCompile(`ctrlnode\.tls: TLS reload refused: keeping the certificate loaded before: error="?(.*)`), 30*time.Second)
		if !strings.Contains(m[1], "private key does not match public key") {
			t.Errorf("node %d refused the reload for another reason: %s", nodes[i].id, m[1])
		}
		p.waitLine(t, regexp.MustCompile(`ctrlnode: SIGHUP: TLS reload failed; (where it failed )?the certificate loaded before stays in use`), 30*time.Second)
		expectServed(i, rotated[i], "after a refused reload")
	}
	progress(2, "the refused reloads")
	load.halt()

	load.mu.Lock()
	calls, acked, failed := load.calls, load.acked, load.failed
	load.mu.Unlock()
	t.Logf("load: %d of %d commands acknowledged", len(acked), calls)
	for _, f := range failed {
		t.Errorf("load command failed: %s", f)
	}
	// A refused handshake that a client's retries hid, or one between
	// the nodes themselves, shows in the refusing node's log.
	handshake := regexp.MustCompile(`TLS handshake failed`)
	for i, p := range procs {
		for _, l := range p.matching(handshake) {
			t.Errorf("node %d: %s", nodes[i].id, l)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The quorum still commits: one more topic, and every topic the load
	// was told about, is listed by each node from its own image.
	r := ctl(t, nil, append([]string{"topics", "create", "--topic", "after-rotation", "--partitions", "2", "--replication-factor", "3",
		"--bootstrap", boot, "--json"}, tlsArgs...)...)
	if r.code != 0 || !strings.Contains(r.stdout, `"created"`) {
		t.Fatalf("create after the rotation: %v", r)
	}
	want := append(acked, "after-rotation")
	dial := admin.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil)
	listedBy := func(i int, names []string) {
		t.Helper()
		// A standby lists what it has applied, which may trail the
		// active controller a little.
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := topicsOn(nodes[i].listener, dial)
			var missing []string
			for _, name := range names {
				if !got[name] {
					missing = append(missing, name)
				}
			}
			if err == nil && len(missing) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not list %d acknowledged topics (%v): %v", nodes[i].id, len(missing), err, missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := range nodes {
		listedBy(i, want)
	}

	// And elects: the active controller stops, another voter takes over
	// and commits a create.
	var q quorumJSON
	ctlJSON(t, 30*time.Second, &q, append([]string{"quorum", "status", "--bootstrap", boot}, tlsArgs...)...)
	leader := -1
	for i, n := range nodes {
		if n.id == q.LeaderID {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("quorum leader %d", q.LeaderID)
	}
	if err := procs[leader].signal(t, syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("node %d exited with %v after SIGTERM", nodes[leader].id, err)
	}
	m, _, ok := procs[leader].find(regexp.MustCompile(`^ctrlnode run: leadership handed over to voter (\d+) before stopping$`))
	if !ok {
		t.Fatalf("node %d did not report handing leadership over", nodes[leader].id)
	}
	successor, _ := strconv.Atoi(m[1])
	survivors := bootstrapOf(nodes, nodes[leader].id)
	var created itemResults
	ctlJSON(t, time.Minute, &created, append([]string{"topics", "create", "--topic", "after-election", "--partitions", "1",
		"--replication-factor", "2", "--bootstrap", survivors}, tlsArgs...)...)
	if len(created.Results) != 1 || created.Results[0].Status != "created" {
		t.Fatalf("create after the election: %+v", created)
	}
	ctlJSON(t, 30*time.Second, &q, append([]string{"quorum", "status", "--bootstrap", survivors}, tlsArgs...)...)
	if int(q.LeaderID) != successor {
		t.Fatalf("quorum leader %d after the handover, want %d", q.LeaderID, successor)
	}
	for i := range nodes {
		if i != leader {
			listedBy(i, []string{"after-rotation", "after-election"})
		}
	}
}
