package nemesis

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// Timeline records the faults of a run as they happen.
type Timeline struct {
	now func() time.Time

	mu      sync.Mutex
	events  []history.FaultEvent
	sink    io.Writer
	sinkErr error
}

// NewTimeline starts a timeline on the given clock (use the history
// recorder's, so faults and ops share one) — time.Now when nil. When sink
// is not nil every event is also written to it as a JSON line at once.
func NewTimeline(now func() time.Time, sink io.Writer) *Timeline {
	if now == nil {
		now = time.Now
	}
	return &Timeline{now: now, sink: sink}
}

// Record adds an event for fault f and returns it.
func (t *Timeline) Record(f Fault, phase history.Phase, detail string, err error) history.FaultEvent {
	e := history.FaultEvent{Fault: f.ID, Kind: string(f.Kind), Phase: phase, Detail: detail}
	if f.Kind.Broker() {
		e.Nodes = append(e.Nodes, f.Brokers...)
	} else {
		e.Nodes = append(e.Nodes, f.Hosts...)
	}
	if err != nil {
		e.Error = err.Error()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e.Time = t.now() // under the lock: the timeline is in time order
	t.events = append(t.events, e)
	if t.sink != nil && t.sinkErr == nil {
		t.sinkErr = history.WriteJSONL(t.sink, []history.FaultEvent{e})
	}
	return e
}

// Events returns the events so far, in the order they were recorded.
func (t *Timeline) Events() []history.FaultEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]history.FaultEvent(nil), t.events...)
}

// Text is the timeline as readable lines.
func (t *Timeline) Text() string {
	var b strings.Builder
	for _, e := range t.Events() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Cluster is what the runner applies faults to. Hosts are numbered from 1
// (voter i on 127.0.0.i); brokers by id. Every method must be safe to call
// again for a target already in that state (a heal after a failed start).
type Cluster interface {
	// Leader is the host of the active controller.
	Leader(ctx context.Context) (int, error)
	Kill(ctx context.Context, host int) error
	Restart(ctx context.Context, host int) error
	Pause(ctx context.Context, host int) error
	Resume(ctx context.Context, host int) error
	// Cut installs the partition's drop rules; Heal removes every rule.
	Cut(ctx context.Context, cuts []Cut) error
	Heal(ctx context.Context) error
	CrashBroker(ctx context.Context, id int) error
	RestartBroker(ctx context.Context, id int) error
	SetHeartbeats(ctx context.Context, id int, on bool) error
	// PowerLoss cuts the power of host's disk (keeping a prefix of what
	// was not synced, drawn from seed, or dropping it all) and kills its
	// voter; it returns the cut's report. PowerRestore mounts the disk
	// again on what survived and restarts the voter.
	PowerLoss(ctx context.Context, host int, keepPrefix bool, seed uint64) (report string, err error)
	PowerRestore(ctx context.Context, host int) error
	// WipeDisk kills host's voter -9, wipes its data directory, formats
	// it again to join the quorum (a new directory id) and starts it; the
	// report names both directory ids and whether the node logged that
	// it was refused as the voter it was. ReplaceVoter removes host's
	// voter of the directory before the wipe and adds the node under its
	// new directory id.
	WipeDisk(ctx context.Context, host int) (report string, err error)
	ReplaceVoter(ctx context.Context, host int) error
}

// Runner applies a schedule.
type Runner struct {
	Cluster  Cluster
	Timeline *Timeline
	// Hosts is the number of hosts (3 by default).
	Hosts int
	// HealTimeout bounds each heal, which runs even after ctx is done.
	// Default: 30 s.
	HealTimeout time.Duration
	// Logf, when set, gets a line per event.
	Logf func(format string, args ...any)
}

// Run applies each fault at its offset from now and heals it after its
// length. When ctx ends it heals the fault in progress and returns ctx's
// error; a fault in progress is always healed. Errors applying or healing
// a fault are recorded on the timeline and do not stop the run.
func (r *Runner) Run(ctx context.Context, schedule []Fault) error {
	hosts := r.Hosts
	if hosts == 0 {
		hosts = 3
	}
	start := time.Now()
	for _, f := range schedule {
		if err := waitUntil(ctx, start.Add(f.At)); err != nil {
			return err
		}
		if f.Leader {
			leader, err := r.Cluster.Leader(ctx)
			if err != nil {
				r.record(f, history.Start, "no active controller to target", err)
				continue
			}
			f = f.Resolve(leader, hosts)
		}
		r.apply(ctx, f, start.Add(f.At+f.For))
	}
	return ctx.Err()
}

func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) record(f Fault, phase history.Phase, detail string, err error) {
	e := r.Timeline.Record(f, phase, detail, err)
	if r.Logf != nil {
		r.Logf("nemesis: %s", e)
	}
}

// apply starts f, waits until healAt (or ctx's end) and heals it.
func (r *Runner) apply(ctx context.Context, f Fault, healAt time.Time) {
	c := r.Cluster
	var err error
	detail := ""
	var flapDone chan struct{}
	switch f.Kind {
	case Kill:
		detail = fmt.Sprintf("kill -9 the voter on %s", HostIP(f.Hosts[0]))
		err = c.Kill(ctx, f.Hosts[0])
	case Pause:
		detail = fmt.Sprintf("SIGSTOP the voter on %s", HostIP(f.Hosts[0]))
		err = c.Pause(ctx, f.Hosts[0])
	case PowerLoss:
		var report string
		report, err = c.PowerLoss(ctx, f.Hosts[0], f.KeepPrefix, f.CutSeed)
		detail = fmt.Sprintf("cut the power of the disk of the voter on %s (%s, seed %d), kill -9 it: %s", HostIP(f.Hosts[0]), f.CutMode(), f.CutSeed, report)
	case ReplaceVoter:
		var report string
		report, err = c.WipeDisk(ctx, f.Hosts[0])
		detail = fmt.Sprintf("kill -9 the voter on %s, wipe its data directory, format it again and start it: %s", HostIP(f.Hosts[0]), report)
	case PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge:
		cs := make([]string, len(f.Cuts))
		for i, x := range f.Cuts {
			cs[i] = x.String()
		}
		detail = "drop " + strings.Join(cs, " ")
		err = c.Cut(ctx, f.Cuts)
	case BrokerCrash:
		detail = fmt.Sprintf("kill -9 broker %d", f.Brokers[0])
		err = c.CrashBroker(ctx, f.Brokers[0])
	case HeartbeatFlap:
		detail = fmt.Sprintf("broker %d heartbeats off and on every %s", f.Brokers[0], f.FlapPeriod)
		err = c.SetHeartbeats(ctx, f.Brokers[0], false)
		if err == nil {
			flapDone = make(chan struct{})
			go r.flap(ctx, f, healAt, flapDone)
		}
	}
	r.record(f, history.Start, detail, err)
	_ = waitUntil(ctx, healAt)
	if flapDone != nil {
		<-flapDone // it stops at healAt or ctx's end too
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.healTimeout())
	defer cancel()
	switch f.Kind {
	case Kill:
		detail, err = "restart the voter", c.Restart(hctx, f.Hosts[0])
	case Pause:
		detail, err = "SIGCONT the voter", c.Resume(hctx, f.Hosts[0])
	case PowerLoss:
		detail, err = "mount the disk again on what survived, restart the voter", c.PowerRestore(hctx, f.Hosts[0])
	case ReplaceVoter:
		detail, err = "remove the voter of the old directory, add the node under its new one", c.ReplaceVoter(hctx, f.Hosts[0])
	case PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge:
		detail, err = "remove every drop rule", c.Heal(hctx)
	case BrokerCrash:
		detail, err = "restart the broker", c.RestartBroker(hctx, f.Brokers[0])
	case HeartbeatFlap:
		detail, err = "heartbeats on", c.SetHeartbeats(hctx, f.Brokers[0], true)
	}
	r.record(f, history.Heal, detail, err)
}

// flap toggles a broker's heartbeats every period until healAt or ctx's
// end, leaving them off (the heal turns them on).
func (r *Runner) flap(ctx context.Context, f Fault, healAt time.Time, done chan<- struct{}) {
	defer close(done)
	on := false
	tick := time.NewTicker(f.FlapPeriod)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(healAt))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-tick.C:
			on = !on
			err := r.Cluster.SetHeartbeats(ctx, f.Brokers[0], on)
			state := "off"
			if on {
				state = "on"
			}
			r.record(f, history.Note, "heartbeats "+state, err)
		}
	}
}

func (r *Runner) healTimeout() time.Duration {
	if r.HealTimeout > 0 {
		return r.HealTimeout
	}
	return 30 * time.Second
}
