package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// BalanceConfig configures the automatic preferred-leader rebalance
// (Kafka's auto.leader.rebalance.enable and friends).
type BalanceConfig struct {
	// Interval is how often the balance is checked while this node is the
	// active controller (Kafka's leader.imbalance.check.interval.seconds).
	// Zero turns the automatic rebalance off.
	Interval time.Duration
	// ImbalancePercent is Kafka's leader.imbalance.per.broker.percentage:
	// a broker's partitions are moved back to it when more than this
	// percentage of the partitions it is the preferred replica of are led
	// by another broker. Zero rebalances on any imbalance.
	ImbalancePercent int
	// MaxPerRun bounds the elections of one run, so one run is one event
	// of bounded size; a run that leaves candidates is followed by another
	// at once. Zero means DefaultMaxPerRun.
	MaxPerRun int
}

// DefaultMaxPerRun is the number of preferred elections one rebalance run
// makes at most when BalanceConfig.MaxPerRun is zero.
const DefaultMaxPerRun = 10_000

// DefaultBalanceConfig is Kafka's default: checked every 5 minutes,
// rebalanced above 10% per broker.
func DefaultBalanceConfig() BalanceConfig {
	return BalanceConfig{Interval: 5 * time.Minute, ImbalancePercent: 10, MaxPerRun: DefaultMaxPerRun}
}

func (b BalanceConfig) maxPerRun() int {
	if b.MaxPerRun <= 0 {
		return DefaultMaxPerRun
	}
	return b.MaxPerRun
}

// BalanceResult is what a rebalance did.
type BalanceResult struct {
	// Brokers are the brokers found imbalanced, whose partitions were
	// moved back to them.
	Brokers []int32
	// Moved is the number of partitions whose leadership moved back to
	// their preferred replica.
	Moved int
	// Failed is the number of elections tried that did not move (the
	// image changed between the scan and the election).
	Failed int
	// Runs is the number of events the elections were split into
	// (MaxPerRun each at most).
	Runs int
}

// balancer is the automatic rebalance of one controller: its settings
// and the goroutine that runs it.
type balancer struct {
	mu   sync.Mutex
	cfg  BalanceConfig
	stop chan struct{}
	done chan struct{}
}

// balancers holds the balancer of each controller that has one.
var balancers sync.Map // *Controller -> *balancer

// defaultBalance is what RebalanceLeaders runs with before SetBalance.
var defaultBalance = BalanceConfig{ImbalancePercent: 10}

// SetBalance sets the automatic preferred-leader rebalance. With a
// positive Interval a goroutine checks the balance at that interval
// whenever this node is the active controller (and runs
// CheckReassignments with it); a zero Interval stops it. The settings
// apply to RebalanceLeaders too. SetBalance(BalanceConfig{}) stops the
// goroutine and restores the defaults (10%, DefaultMaxPerRun); call it
// before dropping a controller that had an interval set.
func (c *Controller) SetBalance(cfg BalanceConfig) {
	v, _ := balancers.LoadOrStore(c, &balancer{})
	b := v.(*balancer)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		close(b.stop)
		<-b.done
		b.stop, b.done = nil, nil
	}
	b.cfg = cfg
	if cfg == (BalanceConfig{}) {
		balancers.Delete(c)
		return
	}
	if cfg.Interval <= 0 {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go c.runBalancer(cfg, b.stop, b.done)
}

func (c *Controller) balanceConfig() BalanceConfig {
	v, ok := balancers.Load(c)
	if !ok {
		return defaultBalance
	}
	b := v.(*balancer)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

func (c *Controller) runBalancer(cfg BalanceConfig, stop, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if ok, _ := c.Active(); !ok {
			continue
		}
		if err := c.CheckReassignments(ctx); err != nil {
			c.log.Debug("reassignment check failed", "error", err)
		}
		if _, err := c.rebalance(ctx, cfg); err != nil {
			c.log.Debug("leader rebalance failed", "error", err)
		}
	}
}

// RebalanceLeaders runs a preferred-leader rebalance now, as the
// automatic one does at each interval. A broker is imbalanced when more
// than ImbalancePercent of the partitions it is the preferred replica of
// are led by another broker (Kafka's leader.imbalance.per.broker.
// percentage); each such partition whose preferred replica is live, not
// shutting down and in the ISR then gets a preferred election. The
// elections are split into runs of at most MaxPerRun, each its own event,
// so other events are not held up behind a large rebalance; the brokers
// found imbalanced by the first run are carried on by the next ones until
// none of their partitions is left to try (the image is scanned once per
// rebalance; a later run checks each partition again). Topics being
// deleted and partitions being reassigned are left alone, as Kafka does.
func (c *Controller) RebalanceLeaders(ctx context.Context) (BalanceResult, error) {
	return c.rebalance(ctx, c.balanceConfig())
}

func (c *Controller) rebalance(ctx context.Context, cfg BalanceConfig) (BalanceResult, error) {
	var total BalanceResult
	var carried []partRef
	for first := true; ; first = false {
		v, _, err := c.submit(ctx, "rebalance-leaders", func(ec *eventCtx) (any, error) {
			return ec.rebalanceRun(cfg, first, carried)
		}, nil)
		if err != nil {
			return total, err
		}
		run := v.(balanceRun)
		total.Runs++
		total.Moved += run.moved
		total.Failed += run.failed
		if first {
			total.Brokers = run.brokers
		}
		carried = run.rest
		if len(carried) == 0 || run.moved+run.failed == 0 {
			return total, nil
		}
	}
}

type preferredStats struct {
	preferred  int
	elsewhere  int
	candidates []partRef
}

type balanceRun struct {
	brokers       []int32
	moved, failed int
	// rest are the candidates left for the next run.
	rest []partRef
}

// rebalanceRun makes at most cfg.MaxPerRun preferred elections. The first
// run of a rebalance scans the image for the imbalanced brokers and their
// candidate partitions; the next ones take up the candidates left, each
// checked again against the image as it is by then.
func (ec *eventCtx) rebalanceRun(cfg BalanceConfig, first bool, carried []partRef) (balanceRun, error) {
	var run balanceRun
	if first {
		run.brokers, carried = ec.imbalancedBrokers(cfg)
	}
	eligible := ec.electableLive()
	budget := cfg.maxPerRun()
	var refs []partRef
	for i, ref := range carried {
		if len(refs) == budget {
			run.rest = carried[i:]
			break
		}
		if ec.preferredCandidate(ref, eligible) {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return run, nil
	}
	failed, err := ec.handlePartitionStateChanges(refs, rl.OnlinePartition, PreferredElection, nil)
	if err != nil {
		return run, err
	}
	run.failed = len(failed)
	run.moved = len(refs) - len(failed)
	return run, nil
}

// preferredCandidate reports whether a preferred election can move the
// partition's leadership back to its preferred replica.
func (ec *eventCtx) preferredCandidate(ref partRef, eligible BrokerSet) bool {
	t := ec.img().Topic(ref.id)
	if t == nil || t.Deleting {
		return false
	}
	if _, ok := t.Reassignments[ref.part]; ok {
		return false
	}
	p := ec.img().Partition(ref.id, ref.part)
	if p == nil || len(p.Replicas) == 0 {
		return false
	}
	pref := p.Replicas[0]
	return p.Leader != pref && eligible.Has(pref) && p.InISR(pref)
}

// imbalancedBrokers finds the brokers above the imbalance threshold and,
// broker by broker in id order, the partitions a preferred election can
// give back to them.
func (ec *eventCtx) imbalancedBrokers(cfg BalanceConfig) ([]int32, []partRef) {
	im := ec.img()
	eligible := ec.electableLive()
	stats := map[int32]*preferredStats{}
	var topics []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool {
		if !t.Deleting {
			topics = append(topics, t)
		}
		return true
	})
	slices.SortFunc(topics, func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) })
	for _, t := range topics {
		im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			if len(p.Replicas) == 0 {
				return true
			}
			if _, ok := t.Reassignments[i]; ok {
				return true
			}
			pref := p.Replicas[0]
			st := stats[pref]
			if st == nil {
				st = &preferredStats{}
				stats[pref] = st
			}
			st.preferred++
			if p.Leader != pref {
				st.elsewhere++
				if eligible.Has(pref) && p.InISR(pref) {
					st.candidates = append(st.candidates, partRef{id: t.ID, name: t.Name, part: i})
				}
			}
			return true
		})
	}
	var brokers []int32
	for b, st := range stats {
		if st.elsewhere*100 > cfg.ImbalancePercent*st.preferred && len(st.candidates) > 0 {
			brokers = append(brokers, b)
		}
	}
	slices.Sort(brokers)
	var cands []partRef
	for _, b := range brokers {
		st := stats[b]
		ec.log.Info("leader imbalance: moving leadership back to the preferred replica", "broker", b,
			"preferred_for", st.preferred, "led_elsewhere", st.elsewhere, "moving", len(st.candidates))
		cands = append(cands, st.candidates...)
	}
	return brokers, cands
}

// PreferredReplicaImbalance counts the partitions, of topics not being
// deleted, whose leader is not their preferred replica (leaderless ones
// included), as Kafka's PreferredReplicaImbalanceCount metric does. It
// reads r as given: hold the FSM's view when r is the committed image.
func PreferredReplicaImbalance(r fsm.Reader) int {
	n := 0
	r.ForEachTopic(func(t *fsm.Topic) bool {
		if t.Deleting {
			return true
		}
		r.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				n++
			}
			return true
		})
		return true
	})
	return n
}
