package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The benchmarks run a real ZooKeeper server (one JVM) and three
// controller voters in this process over loopback TCP with bolt files:
// all of it shares the machine's cores with the benchmark itself.

const benchPerTopic = 100

// writeBenchLayout writes, with multi-ops of up to 1000 creates, a Kafka
// layout of n partitions (topics of 100, replication factor 3 over the
// brokers, leader the first replica, ISR all replicas, leader epochs 0-3).
func writeBenchLayout(b *testing.B, r *rawZK, n, brokers int) {
	start := time.Now()
	var ops []any
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := r.conn.Multi(ops...); err != nil {
			b.Fatalf("multi: %v", err)
		}
		ops = ops[:0]
	}
	create := func(path, data string) {
		ops = append(ops, &zk.CreateRequest{Path: r.root + path, Data: []byte(data), Acl: zk.WorldACL(zk.PermAll)})
		if len(ops) >= 1000 {
			flush()
		}
	}
	r.put("/controller_epoch", "11")
	r.put("/brokers/topics", "")
	r.put("/config/topics", "")
	for id := 1; id <= brokers; id++ {
		r.put(fmt.Sprintf("/brokers/ids/%d", id), fmt.Sprintf(`{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-%d:9092"],"jmx_port":-1,"port":9092,"host":"kafka-%d","version":5,"timestamp":"1700000000000","rack":null}`, id, id))
	}
	for t := 0; t*benchPerTopic < n; t++ {
		name := fmt.Sprintf("bench-%05d", t)
		var assign []string
		reps := make([][]int, benchPerTopic)
		for p := 0; p < benchPerTopic; p++ {
			first := (t*benchPerTopic + p) % brokers
			reps[p] = []int{first + 1, (first+1)%brokers + 1, (first+2)%brokers + 1}
			assign = append(assign, fmt.Sprintf(`"%d":[%d,%d,%d]`, p, reps[p][0], reps[p][1], reps[p][2]))
		}
		var id rl.TopicID
		id[0], id[1], id[2], id[15] = byte(t>>16), byte(t>>8), byte(t), 0x5a
		create(topicPath(name), `{"version":3,"partitions":{`+strings.Join(assign, ",")+`},"adding_replicas":{},"removing_replicas":{},"topic_id":"`+EncodeKafkaUUID(id)+`"}`)
		create(configPath(name), `{"version":1,"config":{}}`)
		create(partitionsPath(name), "")
		for p := 0; p < benchPerTopic; p++ {
			create(partitionPath(name, int32(p)), "")
			create(statePath(name, int32(p)), fmt.Sprintf(`{"controller_epoch":11,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%d,%d,%d]}`,
				reps[p][0], (t+p)%4, reps[p][0], reps[p][1], reps[p][2]))
		}
	}
	flush()
	b.Logf("wrote a Kafka layout of %d partitions to ZooKeeper in %v", n, time.Since(start).Round(time.Millisecond))
}

// zkEraRead reads what a ZooKeeper-era controller reads for partition
// state on failover: the topic list, each topic's partitions, and every
// partition's state znode. parallel 1 is one request at a time (Kafka up
// to 1.0); larger values pipeline on the session (Kafka 1.1's async reads).
func zkEraRead(b *testing.B, c *client, parallel int) (time.Duration, int) {
	start := time.Now()
	topics, err := c.children(pathTopics)
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	for _, t := range topics {
		kids, err := c.children(partitionsPath(t))
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range kids {
			paths = append(paths, partitionsPath(t)+"/"+k+"/state")
		}
	}
	n := 0
	for _, r := range c.getMany(paths, parallel) {
		if r.err != nil || !r.ok {
			b.Fatalf("read state: %v", r.err)
		}
		if _, err := parsePartitionState(r.data); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return time.Since(start), n
}

func medianDur(s []time.Duration) time.Duration {
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[len(c)/2]
}

// rawRaftFloor is the median of sequential applies of a 100-byte entry.
func rawRaftFloor(b *testing.B, node *controller.Node, n int) time.Duration {
	data, err := rl.EncodeBatch([]rl.Record{&rl.TopicConfig{TopicID: rl.TopicID{0xff}, Key: string(make([]byte, 80))}})
	if err != nil {
		b.Fatal(err)
	}
	var s []time.Duration
	for range n {
		start := time.Now()
		if err := node.Voter.Raft().Apply(data, 5*time.Second).Error(); err != nil {
			b.Fatal(err)
		}
		s = append(s, time.Since(start))
	}
	return medianDur(s)
}

// BenchmarkZooKeeperMigration, at 10k and 100k partitions, side by side:
//   - zk-era-read: what a ZooKeeper-era controller paid on failover to
//     reload partition state (every state znode read from a real
//     ZooKeeper), one request at a time and pipelined;
//   - failover: our activation (new leader known -> controller ready)
//     after stopping the active voter, median of 3, with the raw raft
//     floor of the same cluster;
//   - import: Migrate of the same layout (read + commit), partitions/s;
//   - mirror: the first full reconcile, then the lag from the commit of a
//     broker failure (the broker leads a tenth of the partitions and
//     hosts three tenths) to ZooKeeper showing it.
func BenchmarkZooKeeperMigration(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for range b.N {
				benchMigration(b, n)
			}
		})
	}
}

func benchMigration(b *testing.B, n int) {
	const brokers = 10
	addr, _ := chrootAddr(b)
	r := dialRaw(b, addr)
	writeBenchLayout(b, r, n, brokers)

	// What a ZooKeeper-era controller paid.
	zc, err := dial(addr, 30*time.Second, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer zc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := zc.waitSession(ctx); err != nil {
		b.Fatal(err)
	}
	seq, got := zkEraRead(b, zc, 1)
	if got != n {
		b.Fatalf("read %d state znodes, wrote %d", got, n)
	}
	piped, _ := zkEraRead(b, zc, 256)
	b.Logf("zk-era failover read of %d state znodes: %v one at a time (%.1f µs each), %v pipelined",
		n, seq.Round(time.Millisecond), float64(seq.Microseconds())/float64(n), piped.Round(time.Millisecond))

	// Import into three voters.
	c := newCluster(b, 3, 30*time.Minute, "", true)
	_, node := c.active(30 * time.Second)
	floor := rawRaftFloor(b, node, 50)
	// A leadership change in the middle (the machine is shared) is met
	// the way an operator would: run the import again on the new active
	// node; it resumes where the log left it.
	var plan Plan
	imported, attempts := 0, 0
	importStart := time.Now()
	for {
		attempts++
		p, err := Migrate(ctx, addr, node, false, nil)
		imported += p.Partitions
		if err == nil {
			plan = p
			break
		}
		if !errors.Is(err, controller.ErrNotController) || attempts == 4 {
			b.Fatalf("import: %v", err)
		}
		b.Logf("import attempt %d: %v: again on the new active node", attempts, err)
		_, node = c.active(time.Minute)
	}
	wall := time.Since(importStart)
	if imported < n {
		b.Fatalf("imported %d partitions, want %d", imported, n)
	}
	// The rate is that of the attempt that did the work (read + commit).
	total := plan.ReadTime + plan.CommitTime
	b.Logf("import of %d partitions: %d records; read %v, commit %v: %.0f partitions/s (read + commit), %.0f partitions/s commit only; %d attempt(s), %v wall",
		plan.Partitions, plan.Records, plan.ReadTime.Round(time.Millisecond), plan.CommitTime.Round(time.Millisecond),
		float64(plan.Partitions)/total.Seconds(), float64(plan.Partitions)/plan.CommitTime.Seconds(), attempts, wall.Round(time.Millisecond))
	c.converged(10 * time.Minute)

	// Mirror: initial reconcile, then a broker failure.
	idx, node := c.active(time.Second)
	m, err := StartMirror(MirrorConfig{Addr: addr, Node: node})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := m.WaitSynced(ctx, node.FSM.AppliedIndex()); err != nil {
		b.Fatal(err)
	}
	initial := time.Since(start)
	before := m.Stats()
	var epoch int64
	node.FSM.View(func(im *fsm.Image) { epoch = im.Broker(1).Epoch })
	start = time.Now()
	if _, err := node.Controller.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: node.FSM.AppliedIndex(), WantFence: true}); err != nil {
		b.Fatal(err)
	}
	committed := time.Now()
	applied := node.FSM.AppliedIndex()
	if err := m.WaitSynced(ctx, applied); err != nil {
		b.Fatal(err)
	}
	lag := time.Since(committed)
	after := m.Stats()
	m.Stop()
	if v, _ := r.get(statePath("bench-00000", 0)); !strings.Contains(v, `"isr":[2,3]`) {
		b.Fatalf("broker 1's failure is not in ZooKeeper: %s", v)
	}
	b.Logf("mirror: first full reconcile %v (%d znode writes in %d multis); broker failure: commit %v, then ZooKeeper caught up %v later (%d znode writes in %d multis)",
		initial.Round(time.Millisecond), before.Ops, before.Multis, committed.Sub(start).Round(time.Millisecond), lag.Round(time.Millisecond),
		after.Ops-before.Ops, after.Multis-before.Multis)

	// Our failover at the same size.
	var ready []time.Duration
	for round := 0; round < 3; round++ {
		idx, _ = c.active(30 * time.Second)
		c.stop(idx)
		_, nn := c.active(2 * time.Minute)
		st := nn.Controller.LastActivation()
		ready = append(ready, st.Ready.Sub(st.Started))
		c.start(idx, nil)
		c.converged(10 * time.Minute)
	}
	fo := medianDur(ready)
	b.Logf("failover at %d partitions: activation median %v of %v; raw raft floor %v (ratio %.1f); zk-era read %v sequential / %v pipelined",
		n, fo, ready, floor, float64(fo)/float64(floor), seq.Round(time.Millisecond), piped.Round(time.Millisecond))
	b.ReportMetric(float64(seq.Milliseconds()), "zk-read-seq-ms")
	b.ReportMetric(float64(piped.Milliseconds()), "zk-read-piped-ms")
	b.ReportMetric(float64(fo.Microseconds())/1000, "failover-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "raft-floor-ms")
	b.ReportMetric(float64(plan.Partitions)/total.Seconds(), "import-partitions/s")
	b.ReportMetric(float64(lag.Milliseconds()), "mirror-lag-ms")
	c.shutdown()
}
