package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// TestDataAcrossLeaderKill runs three `ctrlnode run` nodes (a voter and a
// broker with a data directory each) and writes with a kgo producer,
// acks=all and no idempotence, while the node whose broker leads the
// partition is killed with SIGKILL and started again. Every acknowledged
// record is read back by a kgo consumer at the offset it was
// acknowledged at, exactly once; once the killed broker is back in the
// ISR, the three replicas' logs agree byte for byte on what they have in
// common; and kcat's records, produced before
// the kill to a partition the killed broker led, are read back by kcat
// after it.
func TestDataAcrossLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	_, kcatErr := exec.LookPath("kcat")
	testkit.Need(t, "kcat", kcatErr)
	all, nodes, dir := threeNodeSettings(t, [2]string{"broker.replica.lag.time", "3s"})
	var brokers []string
	dataDirs := map[int32]string{}
	for i := range nodes {
		id := int32(i + 1)
		dataDirs[id] = filepath.Join(dir, fmt.Sprintf("broker-%d", id))
		all[i] = append(all[i], [2]string{"broker.data.dir", dataDirs[id]})
		brokers = append(brokers, setting(t, all[i], "broker.listener"))
		nodes[i].args = append(nodes[i].args, "--config", configFile(t, dir, nodes[i].id, all[i]))
	}
	procs := map[int32]*proc{} // by broker id
	for i, n := range nodes {
		procs[int32(i+1)] = n.start(t)
	}
	boot := bootstrapOf(nodes)
	waitFor(t, time.Minute, "topic data created", func() bool {
		r := ctl(t, nil, "topics", "create", "--bootstrap", boot, "--topic", "data", "--partitions", "1", "--replication-factor", "3")
		return r.code == 0 || strings.Contains(r.stdout+r.stderr, "TOPIC_ALREADY_EXISTS")
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(200*time.Millisecond), kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	partitionOf := func(topic string) (kadm.PartitionDetail, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := kadm.NewClient(cl).Metadata(ctx, topic)
		if err != nil {
			return kadm.PartitionDetail{}, false
		}
		p, ok := md.Topics[topic].Partitions[0]
		return p, ok
	}
	leaderOf := func(topic string) int32 {
		if p, ok := partitionOf(topic); ok {
			return p.Leader
		}
		return -1
	}
	var victim int32
	waitFor(t, time.Minute, "a leader of data-0", func() bool { victim = leaderOf("data"); return victim > 0 })

	// kcat's topic is led by the same broker.
	var others []string
	for id := int32(1); id <= 3; id++ {
		if id != victim {
			others = append(others, strconv.Itoa(int(id)))
		}
	}
	assign := strconv.Itoa(int(victim)) + ":" + strings.Join(others, ":")
	if r := ctl(t, nil, "topics", "create", "--bootstrap", boot, "--topic", "kcat", "--replica-assignment", assign); r.code != 0 {
		t.Fatalf("create kcat's topic: %v", r)
	}
	waitFor(t, time.Minute, "kcat's topic led by the victim", func() bool { return leaderOf("kcat") == victim })
	kcatIn := "k1\nk2\nk3\n"
	kcatP := exec.Command("kcat", "-P", "-b", strings.Join(brokers, ","), "-t", "kcat", "-p", "0", "-X", "acks=all")
	kcatP.Stdin = strings.NewReader(kcatIn)
	if out, err := kcatP.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	var mu sync.Mutex
	acked := map[int64]string{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: "data", Partition: 0, Value: []byte(fmt.Sprintf("v%d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				continue
			}
			mu.Lock()
			if old, dup := acked[r.Offset]; dup {
				t.Errorf("offset %d acknowledged twice: %s and %s", r.Offset, old, r.Value)
			}
			acked[r.Offset] = string(r.Value)
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, time.Minute, "records acknowledged", func() bool { return count() >= 100 })
	if err := procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[victim].done
	killedAt, n := time.Now(), count()
	waitFor(t, time.Minute, "records acknowledged by a new leader", func() bool { return count() >= n+100 })
	t.Logf("killed broker %d after %d acknowledged records; %d more within %v", victim, n, count()-n, time.Since(killedAt).Round(time.Millisecond))

	// kcat reads its records back through the new leader.
	kcatC := exec.Command("kcat", "-C", "-b", strings.Join(brokers, ","), "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n")
	out, err := kcatC.Output()
	if err != nil || string(out) != "0 k1\n1 k2\n2 k3\n" {
		t.Fatalf("kcat -C after the kill: %v\n%q", err, out)
	}

	// The restarted broker still holds what it appended as leader and
	// nobody acknowledged; only once it has truncated that and caught up
	// does the ISR take it back. Its log is compared below only from then.
	procs[victim] = nodes[victim-1].start(t)
	waitFor(t, 2*time.Minute, "the killed broker back in the ISR", func() bool {
		p, ok := partitionOf("data")
		return ok && slices.Contains(p.ISR, victim)
	})
	n = count()
	waitFor(t, 2*time.Minute, "records acknowledged with the killed broker back", func() bool { return count() >= n+100 })
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	var end int64
	for o := range acked {
		end = max(end, o+1)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"data": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int64]string{}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	for next := int64(0); next < end; {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read up to %d of %d: %v", next, end, rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if old, dup := got[r.Offset]; dup {
				t.Fatalf("offset %d read twice: %s, then %s", r.Offset, old, r.Value)
			}
			got[r.Offset] = string(r.Value)
			next = max(next, r.Offset+1)
		})
	}
	for o, v := range acked {
		if got[o] != v {
			t.Fatalf("offset %d: read %q, acknowledged %q", o, got[o], v)
		}
	}
	t.Logf("%d records acknowledged, all read back at their offsets", len(acked))

	// Stopped, the replicas' logs agree on every byte they share.
	for _, p := range procs {
		if !p.exited() {
			_ = p.signal(t, syscall.SIGTERM, time.Minute)
		}
	}
	var logs [][]byte
	for id := int32(1); id <= 3; id++ {
		pdir := filepath.Join(dataDirs[id], "data-0")
		tid, err := partlog.TopicID(pdir)
		if err != nil {
			t.Fatalf("broker %d's log: %v", id, err)
		}
		l, err := partlog.Open(pdir, partlog.Config{TopicID: tid})
		if err != nil {
			t.Fatalf("broker %d's log: %v", id, err)
		}
		b, err := readLog(l)
		_ = l.Close()
		if err != nil {
			t.Fatalf("broker %d's log: %v", id, err)
		}
		logs = append(logs, b)
	}
	for i := 1; i < 3; i++ {
		k := min(len(logs[0]), len(logs[i]))
		if !bytes.Equal(logs[0][:k], logs[i][:k]) {
			t.Fatalf("broker 1's and broker %d's logs differ within their first %d bytes", i+1, k)
		}
	}
}

// readLog reads a whole log's batches.
func readLog(l *partlog.Log) ([]byte, error) {
	var out []byte
	for o := l.StartOffset(); o < l.EndOffset(); {
		b, err := l.Read(o, l.EndOffset(), 1<<20)
		if err != nil {
			return nil, err
		}
		bs, err := partlog.ParseBatches(b)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		o = bs[len(bs)-1].NextOffset()
	}
	return out, nil
}

// TestDivergentReplicaTruncatedAcrossProcesses makes replicas diverge as
// a leader's crash does, with real processes: both followers are paused
// (SIGSTOP) while the leader takes records with acks=1 that they never
// fetch (but the first, which may answer a fetch already waiting); the leader is killed -9 and the followers resumed before their
// sessions expire, so one of them leads the next epoch without those
// records and takes others at the same offsets. The old leader, started
// again, truncates its own to the new leader's end of their common epoch
// before it fetches: in the end all three logs are the same, byte for
// byte.
func TestDivergentReplicaTruncatedAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	all, nodes, dir := threeNodeSettings(t, [2]string{"broker.replica.lag.time", "60s"})
	var brokers []string
	dataDirs := map[int32]string{}
	for i := range nodes {
		id := int32(i + 1)
		for k := range all[i] {
			if all[i][k][0] == "session.timeout" {
				all[i][k][1] = "6s" // room for the pause below
			}
		}
		dataDirs[id] = filepath.Join(dir, fmt.Sprintf("broker-%d", id))
		all[i] = append(all[i], [2]string{"broker.data.dir", dataDirs[id]})
		brokers = append(brokers, setting(t, all[i], "broker.listener"))
		nodes[i].args = append(nodes[i].args, "--config", configFile(t, dir, nodes[i].id, all[i]))
	}
	procs := map[int32]*proc{}
	for i, n := range nodes {
		procs[int32(i+1)] = n.start(t)
	}
	boot := bootstrapOf(nodes)
	waitFor(t, time.Minute, "topic div created", func() bool {
		r := ctl(t, nil, "topics", "create", "--bootstrap", boot, "--topic", "div", "--partitions", "1", "--replication-factor", "3")
		return r.code == 0 || strings.Contains(r.stdout+r.stderr, "TOPIC_ALREADY_EXISTS")
	})
	client := func(acks kgo.Acks) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(200*time.Millisecond), kgo.RetryTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	all1, one := client(kgo.AllISRAcks()), client(kgo.LeaderAck())
	produce := func(cl *kgo.Client, v string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := &kgo.Record{Topic: "div", Partition: 0, Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		return r.Offset
	}
	for i := 0; i < 20; i++ {
		produce(all1, fmt.Sprintf("common-%d", i))
	}
	// The leader, as the followers' own metadata says.
	var leader int32
	waitFor(t, time.Minute, "the leader of div-0", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := kadm.NewClient(all1).Metadata(ctx, "div")
		if err == nil {
			leader = md.Topics["div"].Partitions[0].Leader
		}
		return err == nil && leader > 0
	})
	produce(one, "warm-up") // the acks=1 client knows the leader now
	var followers []int32
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			followers = append(followers, id)
		}
	}
	for _, f := range followers {
		if err := procs[f].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	paused := time.Now()
	for i := 0; i < 10; i++ {
		produce(one, fmt.Sprintf("lost-%d", i))
	}
	if err := procs[leader].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[leader].done
	for _, f := range followers {
		if err := procs[f].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("followers %v paused for %v while leader %d took 10 records with acks=1", followers, time.Since(paused).Round(time.Millisecond), leader)
	for i := 0; i < 10; i++ {
		produce(all1, fmt.Sprintf("new-%d", i))
	}
	procs[leader] = nodes[leader-1].start(t)
	// The old leader is back in the ISR once it caught up, and then an
	// acks=all record is on it too.
	waitFor(t, 2*time.Minute, "the old leader back in the ISR", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := kadm.NewClient(all1).Metadata(ctx, "div")
		return err == nil && slices.Contains(md.Topics["div"].Partitions[0].ISR, leader)
	})
	procs[leader].waitLine(t, regexp.MustCompile(`truncated to the leader's epoch end: .*topic=div partition=0`), time.Second)
	produce(all1, "after-restart")
	// The old leader caught up: its log matches the new leader's.
	for _, p := range procs {
		_ = p.signal(t, syscall.SIGTERM, time.Minute)
	}
	var logs [][]byte
	for id := int32(1); id <= 3; id++ {
		pdir := filepath.Join(dataDirs[id], "div-0")
		tid, err := partlog.TopicID(pdir)
		if err != nil {
			t.Fatal(err)
		}
		l, err := partlog.Open(pdir, partlog.Config{TopicID: tid})
		if err != nil {
			t.Fatal(err)
		}
		b, err := readLog(l)
		_ = l.Close()
		if err != nil {
			t.Fatal(err)
		}
		// A follower's fetch waiting at the leader when it was paused
		// may have been answered (its socket took the answer) with the
		// records appended before the leader built that answer: a prefix
		// of them, replicated and kept. Nothing after that prefix can
		// have reached a stopped follower, and the last record never did.
		kept := 0
		for kept < 10 && bytes.Contains(b, []byte(fmt.Sprintf("lost-%d", kept))) {
			kept++
		}
		if kept == 10 {
			t.Errorf("broker %d holds all of the killed leader's acks=1 tail: none was truncated", id)
		}
		for i := kept; i < 10; i++ {
			if m := fmt.Sprintf("lost-%d", i); bytes.Contains(b, []byte(m)) {
				t.Errorf("broker %d holds %s of the killed leader's acks=1 tail, beyond the %d its followers may have fetched before they stopped", id, m, kept)
			}
		}
		if !bytes.Contains(b, []byte("new-9")) {
			t.Errorf("broker %d lacks the new leader's records", id)
		}
		logs = append(logs, b)
	}
	if !bytes.Equal(logs[0], logs[1]) || !bytes.Equal(logs[1], logs[2]) {
		t.Fatalf("the replicas' logs differ: %d, %d and %d bytes", len(logs[0]), len(logs[1]), len(logs[2]))
	}
}
