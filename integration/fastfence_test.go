package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/ops"
)

// The fast-fence tests run three voter-only `ctrlnode run` processes and
// three broker-only ones with data, under a session timeout of a minute,
// so that within the tests' deadlines only a refused listener can fence a
// broker (controller/cluster_refusal.go, transport/sender/liveness.go).

const fastFenceSession = 60 * time.Second

type fenceCluster struct {
	t         *testing.T
	bootstrap string
	http      []string // the voters' HTTP endpoints
	brokers   map[int32]string
	args      map[int32][]string
	voters    []*proc
	procs     map[int32]*proc // brokers
}

func startFenceCluster(t *testing.T) *fenceCluster {
	t.Helper()
	base := freePortBase(t, 0, 1, 2, 100, 101, 102, 200, 201, 202, 300, 301, 302)
	addr := func(off int) string { return fmt.Sprintf("127.0.0.1:%d", base+off) }
	dir := t.TempDir()
	var voters, listeners, ids, rafts, dirs []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@%s", 1001+i, addr(100+i)))
		listeners = append(listeners, fmt.Sprintf("%d@%s", 1001+i, addr(i)))
		ids, rafts = append(ids, strconv.Itoa(1001+i)), append(rafts, addr(100+i))
		dirs = append(dirs, filepath.Join(dir, fmt.Sprintf("voter-%d", 1001+i)))
	}
	c := &fenceCluster{t: t, bootstrap: strings.Join([]string{addr(0), addr(1), addr(2)}, ","),
		brokers: map[int32]string{}, args: map[int32][]string{}, procs: map[int32]*proc{}}
	common := []string{"--session-timeout", fastFenceSession.String(), "--broker-heartbeat-interval", "300ms", "--log-level", "info",
		"--voters", strings.Join(voters, ","), "--voter-listeners", strings.Join(listeners, ",")}
	formatVoters(t, ids, rafts, dirs)
	for i := 0; i < 3; i++ {
		c.http = append(c.http, addr(200+i))
		c.voters = append(c.voters, startProc(t, fmt.Sprintf("voter %d", 1001+i), nil, append([]string{"run", "--node-id", ids[i], "--roles", "voter",
			"--data-dir", dirs[i], "--raft-listener", rafts[i], "--listener", addr(i), "--http-listener", addr(200 + i)}, common...)...))
	}
	for id := int32(1); id <= 3; id++ {
		c.brokers[id] = addr(300 + int(id) - 1)
		c.args[id] = append([]string{"run", "--node-id", strconv.Itoa(int(id)), "--roles", "broker", "--broker-id", strconv.Itoa(int(id)),
			"--broker-listener", c.brokers[id], "--broker-controllers", c.bootstrap,
			"--broker-data-dir", filepath.Join(dir, fmt.Sprintf("broker-%d", id))}, common...)
		c.startBroker(id)
	}
	waitFor(t, time.Minute, "three unfenced brokers", func() bool {
		n := 0
		for _, b := range c.brokerStates() {
			if !b.Fenced {
				n++
			}
		}
		return n == 3
	})
	return c
}

func (c *fenceCluster) startBroker(id int32) {
	c.procs[id] = startProc(c.t, fmt.Sprintf("broker %d", id), nil, c.args[id]...)
}

// brokerStates reads the brokers from the first voter that answers.
func (c *fenceCluster) brokerStates() map[int32]ops.Broker {
	for _, h := range c.http {
		var b ops.Brokers
		if getJSON(h, "/brokers", &b) {
			out := map[int32]ops.Broker{}
			for _, br := range b.Brokers {
				out[br.ID] = br
			}
			return out
		}
	}
	return nil
}

var promLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$`)

// metric sums a metric (with exactly the labels given, as Prometheus
// prints them, e.g. `{broker="3"}`) over the voters.
func (c *fenceCluster) metric(name, labels string) float64 {
	var sum float64
	for _, h := range c.http {
		code, body, err := httpGet("http://" + h + "/metrics")
		if err != nil || code != 200 {
			continue
		}
		for _, l := range strings.Split(body, "\n") {
			if m := promLine.FindStringSubmatch(l); m != nil && m[1] == name && m[2] == labels {
				v, _ := strconv.ParseFloat(m[3], 64)
				sum += v
			}
		}
	}
	return sum
}

// voterLines counts the voters' log lines matching re.
func (c *fenceCluster) voterLines(re *regexp.Regexp) int {
	n := 0
	for _, v := range c.voters {
		n += v.count(re)
	}
	return n
}

// createLedBy creates topic with every partition led by leader (its
// first replica) and waits until clients see it so.
func (c *fenceCluster) createLedBy(cl *kgo.Client, topic string, partitions int, leader int32) {
	c.t.Helper()
	var assign []string
	for p := 0; p < partitions; p++ {
		var rs []string
		for _, b := range []int32{leader, leader%3 + 1, (leader+1)%3 + 1} {
			rs = append(rs, strconv.Itoa(int(b)))
		}
		if p%2 == 1 { // the followers in both orders
			rs[1], rs[2] = rs[2], rs[1]
		}
		assign = append(assign, strings.Join(rs, ":"))
	}
	if r := ctl(c.t, nil, "topics", "create", "--bootstrap-controller", c.bootstrap, "--topic", topic, "--replica-assignment", strings.Join(assign, ",")); r.code != 0 {
		c.t.Fatalf("create %s: %v", topic, r)
	}
	waitFor(c.t, time.Minute, topic+" led by broker "+strconv.Itoa(int(leader)), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := kadm.NewClient(cl).Metadata(ctx, topic)
		if err != nil || len(md.Topics[topic].Partitions) != partitions {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader != leader {
				return false
			}
		}
		return true
	})
}

// TestCrashedBrokerFencedAtOnce: kill -9 of a broker-only process that
// leads every partition of a topic. Under a session timeout of a minute,
// the broker is fenced within the test's deadline (below that timeout)
// and the voter says why (its listener refused a connection after its
// connection reset); then acks=all produces from franz-go and from kcat
// succeed on every partition it led. Started again, the broker registers
// a new epoch and is unfenced: no refusal seen before fences it.
func TestCrashedBrokerFencedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	_, kcatErr := exec.LookPath("kcat")
	testkit.Need(t, "kcat", kcatErr)
	c := startFenceCluster(t)
	var seeds []string
	for id := int32(1); id <= 3; id++ {
		seeds = append(seeds, c.brokers[id])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(200*time.Millisecond), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic, partitions, victim = "fastfence", 3, int32(3)
	c.createLedBy(cl, topic, partitions, victim)
	epoch := c.brokerStates()[victim].Epoch

	if err := c.procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.procs[victim].done
	killed := time.Now()
	waitFor(t, fastFenceSession/2, "the killed broker to be fenced", func() bool {
		b, ok := c.brokerStates()[victim]
		return ok && b.Fenced && b.Epoch == epoch
	})
	why := regexp.MustCompile(`broker 3 fenced: its listener ` + regexp.QuoteMeta(c.brokers[victim]) + ` refused a connection after its connection reset`)
	waitFor(t, 10*time.Second, "a voter to log why", func() bool { return c.voterLines(why) == 1 })
	if n := c.metric("kafka_controller_refused_listener_fences_total", ""); n != 1 {
		t.Fatalf("kafka_controller_refused_listener_fences_total = %v, want 1", n)
	}
	t.Logf("broker %d fenced %v after its kill", victim, time.Since(killed).Round(time.Millisecond))

	for p := int32(0); p < partitions; p++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("kgo-%d", p))}
		err := cl.ProduceSync(ctx, r).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("franz-go acks=all produce to %s-%d: %v", topic, p, err)
		}
		kcat := exec.Command("kcat", "-P", "-b", strings.Join(seeds, ","), "-t", topic, "-p", strconv.Itoa(int(p)), "-X", "acks=all",
			"-X", "message.timeout.ms=30000")
		kcat.Stdin = strings.NewReader(fmt.Sprintf("kcat-%d\n", p))
		if out, err := kcat.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P acks=all to %s-%d: %v\n%s", topic, p, err, out)
		}
	}
	// Both records of each partition are there, on its new leader.
	for p := int32(0); p < partitions; p++ {
		out, err := exec.Command("kcat", "-C", "-b", strings.Join(seeds, ","), "-t", topic, "-p", strconv.Itoa(int(p)), "-o", "beginning", "-e",
			"-f", "%s\n").Output()
		if got, want := string(out), fmt.Sprintf("kgo-%d\nkcat-%d\n", p, p); err != nil || got != want {
			t.Fatalf("kcat -C %s-%d: %v, read %q, want %q", topic, p, err, got, want)
		}
	}

	// Back: a new epoch, unfenced, and no second refusal fence.
	c.startBroker(victim)
	waitFor(t, time.Minute, "the broker back, unfenced, with a new epoch", func() bool {
		b, ok := c.brokerStates()[victim]
		return ok && !b.Fenced && b.Epoch > epoch
	})
	if n := c.metric("kafka_controller_refused_listener_fences_total", ""); n != 1 {
		t.Fatalf("kafka_controller_refused_listener_fences_total = %v after the restart, want 1", n)
	}
}

// TestPausedBrokerNotFencedByRefusal: SIGSTOP of a broker-only process.
// Its kernel keeps its connections and accepts new ones into its
// listener's backlog: the controller's request to it (a topic with a
// replica there) times out and its connection is tried again, and the
// broker stays unfenced, with no reset or refusal counted, until its
// session expires; the fence then says so.
func TestPausedBrokerNotFencedByRefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	c := startFenceCluster(t)
	const victim = int32(2)
	if err := c.procs[victim].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Cleanup(func() { _ = c.procs[victim].cmd.Process.Signal(syscall.SIGCONT) })
	// The controller sends the paused broker what the creation changed.
	// Its answer waits for the brokers to apply the change (read your
	// writes), the paused one too, and times out: the topic is created
	// all the same.
	if r := ctl(t, nil, "topics", "create", "--bootstrap-controller", c.bootstrap, "--topic", "paused", "--replica-assignment", "1:2:3", "--timeout", "5s"); r.code != 0 && r.code != 3 {
		t.Fatalf("create: %v", r)
	}
	label := fmt.Sprintf(`{broker="%d"}`, victim)
	waitFor(t, fastFenceSession, "the controller's request to the paused broker to fail and be retried", func() bool {
		return c.metric("ctrlquorum_sender_request_retries_total", label) >= 1
	})
	// The session ran from the last heartbeat, at most a heartbeat
	// interval before the pause.
	expiry := paused.Add(fastFenceSession - time.Second)
	if b := c.brokerStates()[victim]; b.Fenced && time.Now().Before(expiry) {
		t.Fatalf("the paused broker was fenced %v after the pause, before its session could expire", time.Since(paused).Round(time.Millisecond))
	}
	expired := regexp.MustCompile(`broker session expired: fencing: .*\bbroker=2 `)
	var at time.Time
	waitFor(t, 2*fastFenceSession, "the session to expire", func() bool {
		for _, v := range c.voters {
			if _, when, ok := v.find(expired); ok {
				at = when
				return true
			}
		}
		return false
	})
	if at.Before(expiry) {
		t.Fatalf("fenced %v after the pause, before its session timeout", at.Sub(paused))
	}
	for _, m := range []string{"ctrlquorum_sender_connection_resets_total", "ctrlquorum_sender_listener_refusals_total"} {
		if n := c.metric(m, label); n != 0 {
			t.Fatalf("%s%s = %v for a paused broker", m, label, n)
		}
	}
	if n := c.metric("kafka_controller_refused_listener_fences_total", ""); n != 0 {
		t.Fatalf("kafka_controller_refused_listener_fences_total = %v", n)
	}
	if c.voterLines(regexp.MustCompile(`broker 2 fenced: its listener`)) != 0 {
		t.Fatal("a voter logged a refusal fence of the paused broker")
	}
}
