package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// failureHook is given to every kgo client of a test. Once armed it
// records each failed connection attempt (the TLS handshake, and with
// TLS 1.3 the server's verdict on the client's certificate, are part of
// it) and each request whose write or read failed. kgo retries such
// requests, so the final result of a call alone would hide a handshake
// refused in the middle of a reload.
type failureHook struct {
	armed atomic.Bool
	mu    sync.Mutex
	errs  []string
}

func (h *failureHook) record(what string, meta kgo.BrokerMetadata, err error) {
	if err == nil || !h.armed.Load() || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, fmt.Sprintf("%s to node %d (%s:%d): %v", what, meta.NodeID, meta.Host, meta.Port, err))
}

func (h *failureHook) failures() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

func (h *failureHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.record("connect", meta, err)
}

func (h *failureHook) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	h.record(kmsg.NameForKey(key), meta, e2e.Err())
}

// rotating is one holder of a certificate that the test replaces: the
// new certificate keeps the name and identity and goes to the files the
// holder's Reloader reads.
type rotating struct {
	r    *tlsconfig.Reloader
	uris []*url.URL
}

func (m rotating) name() string {
	return strings.TrimSuffix(filepath.Base(m.r.Files().Cert), ".crt")
}

// reissue writes a new certificate signed by ca over m's files and
// reloads it.
func (m rotating) reissue(t *testing.T, ca *tlsconfig.CA) {
	t.Helper()
	before := m.r.Leaf().SerialNumber
	is, err := ca.Issue(tlsconfig.Leaf{CommonName: m.name(), URIs: m.uris, Hosts: []string{"127.0.0.1", "localhost"},
		Server: true, Client: true, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := m.r.Files()
	if _, err := is.Write(filepath.Dir(f.Cert), m.name(), f.CA); err != nil {
		t.Fatal(err)
	}
	if err := m.r.Reload(); err != nil {
		t.Fatalf("reload %s: %v", m.name(), err)
	}
	if leaf := m.r.Leaf(); leaf.SerialNumber.Cmp(before) == 0 || leaf.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatalf("%s: the reloaded certificate is not the one just issued by %s", m.name(), ca.Cert.Subject)
	}
}

// createLoad is the outcome of the CreateTopics calls of the load.
type createLoad struct {
	mu     sync.Mutex
	done   int
	acked  []string
	failed []string
}

func (l *createLoad) add(name string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	if err != nil {
		l.failed = append(l.failed, fmt.Sprintf("create %s: %v", name, err))
		return
	}
	l.acked = append(l.acked, name)
}

func (l *createLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// TestTLSRotationUnderLoad reloads the certificates of every voter,
// broker and client while several mTLS clients create topics on fresh
// and long-lived connections and three brokers heartbeat. First each
// certificate is reissued by the same CA; then the CA bundle takes a
// second CA, every certificate is switched to one of the new CA, and the
// old CA leaves the bundle. No call of the load fails at any step, every
// topic whose creation was acknowledged is on the active controller, a
// client still holding a certificate of the old CA is locked out, and a
// voter restarted afterwards rejoins over raft with the new certificates.
func TestTLSRotationUnderLoad(t *testing.T) {
	hook := &failureHook{}
	// One leader throughout: a heartbeat or a call that meets an election
	// would count as a failure of the rotation.
	c := newTestCluster(t, clusterOpts{tls: true, stable: true, clientOpts: []kgo.Opt{kgo.WithHooks(hook)}})
	c.startBrokers(3)
	pki := c.tls.pki

	var members []rotating
	for i, id := range c.ids {
		members = append(members, rotating{r: c.tls.voters[i], uris: []*url.URL{tlsconfig.VoterURI(id)}})
	}
	for id := int32(1); id <= 3; id++ {
		members = append(members, rotating{r: c.tls.broker(id), uris: []*url.URL{tlsconfig.BrokerURI(id)}})
	}
	members = append(members, rotating{r: c.tls.admin})

	// The load: each worker has its own client certificate and makes a
	// new client every few calls, so handshakes keep happening while the
	// certificates change under them, besides calls on connections opened
	// before.
	const workers, callsPerClient = 4, 3
	load := &createLoad{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		r := pki.Reloader(pki.Client(fmt.Sprintf("load-%d", w)))
		members = append(members, rotating{r: r})
		wg.Go(func() {
			for n := 0; ; {
				cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(30*time.Second),
					kgo.Dialer(r.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil)), kgo.WithHooks(hook))
				if err != nil {
					load.add("(client)", err)
					return
				}
				adm := kadm.NewClient(cl)
				for range callsPerClient {
					select {
					case <-stop:
						cl.Close()
						return
					default:
					}
					name := fmt.Sprintf("load-%d-%d", w, n)
					n++
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					res, err := adm.CreateTopics(ctx, 1, 3, nil, name)
					cancel()
					if err == nil {
						err = res.Error()
					}
					load.add(name, err)
				}
				cl.Close()
			}
		})
	}
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(stopLoad)

	hbBase := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		hbBase[id] = c.broker(id).hbFailed.Load()
	}
	hook.armed.Store(true)

	// progress waits until every worker has finished a call and every
	// broker has had a heartbeat answered since it was called, so that
	// each step of the rotation has calls on both sides of it.
	progress := func(step string) {
		t.Helper()
		calls := load.count()
		hbs := map[int32]int64{}
		for id := int32(1); id <= 3; id++ {
			hbs[id] = c.broker(id).hbOK.Load()
		}
		waitFor(t, 30*time.Second, "load and heartbeats to go on after "+step, func() bool {
			if load.count() < calls+workers {
				return false
			}
			for id, n := range hbs {
				if c.broker(id).hbOK.Load() <= n {
					return false
				}
			}
			return true
		})
	}
	progress("the start")

	// 1. Every certificate reissued by the same CA.
	for _, m := range members {
		m.reissue(t, pki.CA)
		if strings.HasPrefix(m.name(), "voter-") {
			progress("reloading " + m.name())
		}
	}
	progress("reissuing every certificate")

	// 2. The bundle takes a second CA. A client that keeps the old CA's
	// certificate in memory from here on is accepted until the end.
	next := tlstest.NewPKI(t, "next test cluster CA")
	if err := tlsconfig.WriteFileAtomic(pki.CAFile, append(append([]byte{}, pki.CA.CertPEM...), next.CA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if err := m.r.Reload(); err != nil {
			t.Fatalf("reload %s with both CAs: %v", m.name(), err)
		}
	}
	stale := pki.Reloader(pki.Client("stale"))
	progress("adding the new CA")

	// 3. Every certificate switched to the new CA, one holder at a time:
	// in between, old and new certificates meet on both ends.
	for _, m := range members {
		m.reissue(t, next.CA)
		if strings.HasPrefix(m.name(), "voter-") {
			progress("switching " + m.name() + " to the new CA")
		}
	}
	progress("switching every certificate to the new CA")
	meta := kmsg.NewPtrMetadataRequest()
	for i := range c.ids {
		if _, err := callWith(ctxT(t), stale.Dialer(nil, nil), c.listener(i).Addr().String(), "stale", meta); err != nil {
			t.Fatalf("voter %d refused an old-CA certificate while both CAs are trusted: %v", c.ids[i], err)
		}
	}

	// 4. The old CA leaves the bundle.
	if err := tlsconfig.WriteFileAtomic(pki.CAFile, next.CA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if err := m.r.Reload(); err != nil {
			t.Fatalf("reload %s without the old CA: %v", m.name(), err)
		}
	}
	progress("dropping the old CA")
	stopLoad()
	hook.armed.Store(false)

	for _, f := range hook.failures() {
		t.Errorf("client call failed during the rotation: %s", f)
	}
	for id := int32(1); id <= 3; id++ {
		if n := c.broker(id).hbFailed.Load() - hbBase[id]; n != 0 {
			t.Errorf("broker %d: %d heartbeats failed during the rotation: %q", id, n, c.broker(id).heartbeatErrors())
		}
	}
	load.mu.Lock()
	acked, failed, done := load.acked, load.failed, load.done
	load.mu.Unlock()
	for _, f := range failed {
		t.Errorf("load: %s", f)
	}
	t.Logf("load: %d creates acknowledged of %d", len(acked), done)

	// Every acknowledged topic is on the active controller, and no broker
	// was fenced on the way.
	c.view(c.active(10*time.Second), func(im *fsm.Image) {
		for _, name := range acked {
			if im.TopicByName(name) == nil {
				t.Errorf("acknowledged topic %s is not on the active controller", name)
			}
		}
		for id := int32(1); id <= 3; id++ {
			if b := im.Broker(id); b == nil || b.Fenced {
				t.Errorf("broker %d fenced across the rotation", id)
			}
		}
	})

	// New connections see certificates of the new CA only, and the
	// client with the old CA's certificate is refused.
	for i := range c.ids {
		leaf := tlstest.Presented(t, c.listener(i).Addr().String(), c.tls.admin.ClientConfig("127.0.0.1", nil))
		if leaf.SerialNumber.Cmp(c.tls.voters[i].Leaf().SerialNumber) != 0 || leaf.CheckSignatureFrom(next.CA.Cert) != nil {
			t.Errorf("voter %d presented serial %s, want %s of the new CA", c.ids[i], leaf.SerialNumber, c.tls.voters[i].Leaf().SerialNumber)
		}
		if _, err := callWith(ctxT(t), stale.Dialer(nil, nil), c.listener(i).Addr().String(), "stale", meta); err == nil {
			t.Errorf("voter %d still answers a certificate of the removed CA", c.ids[i])
		}
	}

	// A standby restarted now dials and accepts raft connections with the
	// new certificates only; it catches up, and the quorum still commits.
	sb := c.standbyIndex(c.active(10 * time.Second))
	c.stop(sb)
	c.start(sb, nil, nil)
	if res, err := kadm.NewClient(c.client()).CreateTopics(ctxT(t), 1, 3, nil, "after-rotation"); err != nil || res.Error() != nil {
		t.Fatalf("create after the rotation: %v %v", err, res.Error())
	}
	c.converged(30 * time.Second)
	c.view(sb, func(im *fsm.Image) {
		for _, name := range append(acked, "after-rotation") {
			if im.TopicByName(name) == nil {
				t.Errorf("restarted voter %d lacks topic %s", c.ids[sb], name)
			}
		}
	})
}
