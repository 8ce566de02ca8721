package controller

import (
	"context"
	"slices"
	"time"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// BalanceConfig configures the preferred-leader rebalance (Kafka's
// auto.leader.rebalance.enable and friends). The controller takes it from
// the configs (see balanceFromConfigs) unless SetBalance overrides them.
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

// balanceSettings is what the loop's balance ticker runs with: the
// interval it ticks at and whether a tick rebalances. With the
// automatic rebalance turned off by the configs the ticker still ticks,
// and a tick only counts a check (BalanceChecks): turning it on again
// takes effect at the next tick.
type balanceSettings struct {
	cfg     BalanceConfig
	enabled bool
}

// balanceFromConfigs is the rebalance the configs ask for: the
// cluster-wide default broker configs in the committed image, then this
// node's static settings, then Kafka's defaults (on, every 300 s, 10%).
func (c *Controller) balanceFromConfigs() balanceSettings {
	var b configmodel.Balance
	c.cfg.FSM.View(func(im *fsm.Image) { b = configmodel.ResolveBalance(im.BrokerConfigs(), c.cfg.StaticConfigs) })
	return balanceSettings{cfg: BalanceConfig{Interval: b.Interval, ImbalancePercent: b.ImbalancePercent}, enabled: b.Enabled}
}

// SetBalance overrides the configs' automatic preferred-leader rebalance
// (tests and benchmarks set their own): with a positive Interval the event
// loop checks the balance at that interval whenever this node is the
// active controller (and runs the check of CheckReassignments with it); a
// zero Interval stops it. The settings apply to RebalanceLeaders too.
// SetBalance(BalanceConfig{}) ends the override: the configs rule again.
func (c *Controller) SetBalance(cfg BalanceConfig) {
	c.mu.Lock()
	if cfg == (BalanceConfig{}) {
		c.balanceOverride = nil
	} else {
		c.balanceOverride = &cfg
	}
	c.balanceSets++
	c.mu.Unlock()
	select {
	case c.balanceChanged <- struct{}{}:
	default: // the loop has yet to take the last change: it reads this one too
	}
}

// balance returns the rebalance's current settings (SetBalance's, or the
// configs') and how many times SetBalance was called.
func (c *Controller) balance() (balanceSettings, uint64) {
	c.mu.Lock()
	over, sets := c.balanceOverride, c.balanceSets
	c.mu.Unlock()
	if over != nil {
		return balanceSettings{cfg: *over, enabled: over.Interval > 0}, sets
	}
	return c.balanceFromConfigs(), sets
}

// BalanceChecks counts the automatic rebalance's ticks on this node: each
// one a rebalance, or a check that found it turned off.
func (c *Controller) BalanceChecks() uint64 { return c.balanceChecks.Load() }

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
	b, _ := c.balance()
	return c.rebalance(ctx, b.cfg)
}

func (c *Controller) rebalance(ctx context.Context, cfg BalanceConfig) (BalanceResult, error) {
	var total BalanceResult
	var carried []partRef
	for first := true; ; first = false {
		v, _, err := c.submit(ctx, "rebalance-leaders", computeRebalanceRun(cfg, first, carried), nil)
		if err != nil {
			return total, err
		}
		next, more := total.add(v.(balanceRun), first)
		if !more {
			return total, nil
		}
		carried = next
	}
}

// computeRebalanceRun is the compute of one run of a rebalance.
func computeRebalanceRun(cfg BalanceConfig, first bool, carried []partRef) computeFunc {
	return func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.replication.rebalanceRun(w, cfg, first, carried))
	}
}

// add counts a run into the rebalance's result and returns the candidates
// left for the next run, and whether there is to be one.
func (total *BalanceResult) add(run balanceRun, first bool) (rest []partRef, more bool) {
	total.Runs++
	total.Moved += run.moved
	total.Failed += run.failed
	if first {
		total.Brokers = run.brokers
	}
	return run.rest, len(run.rest) > 0 && run.moved+run.failed > 0
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
func (m *replicationManager) rebalanceRun(w *work, cfg BalanceConfig, first bool, carried []partRef) (balanceRun, error) {
	var run balanceRun
	if first {
		run.brokers, carried = m.imbalancedBrokers(w, cfg)
	}
	eligible := w.electableLive()
	budget := cfg.maxPerRun()
	var refs []partRef
	for i, ref := range carried {
		if len(refs) == budget {
			run.rest = carried[i:]
			break
		}
		if m.preferredCandidate(w, ref, eligible) {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return run, nil
	}
	failed, err := m.handlePartitionStateChanges(w, refs, rl.OnlinePartition, PreferredElection, nil)
	if err != nil {
		return run, err
	}
	run.failed = len(failed)
	run.moved = len(refs) - len(failed)
	return run, nil
}

// preferredCandidate reports whether a preferred election can move the
// partition's leadership back to its preferred replica.
func (m *replicationManager) preferredCandidate(w *work, ref partRef, eligible BrokerSet) bool {
	t := w.img().Topic(ref.id)
	if t == nil || t.Deleting {
		return false
	}
	if _, ok := t.Reassignments[ref.part]; ok {
		return false
	}
	p := w.img().Partition(ref.id, ref.part)
	if p == nil || len(p.Replicas) == 0 {
		return false
	}
	pref := p.Replicas[0]
	return p.Leader != pref && eligible.Has(pref) && p.InISR(pref)
}

// imbalancedBrokers finds the brokers above the imbalance threshold and,
// broker by broker in id order, the partitions a preferred election can
// give back to them.
func (m *replicationManager) imbalancedBrokers(w *work, cfg BalanceConfig) ([]int32, []partRef) {
	im := w.img()
	eligible := w.electableLive()
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
		w.log.Info("leader imbalance: moving leadership back to the preferred replica", "broker", b,
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
