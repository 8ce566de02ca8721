package replica

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
)

// Retention and segment rolls by each topic's configs, resolved on every
// housekeeping tick from the agent's levels (the topic, this broker's
// dynamic configs, the cluster default, static settings), so a change
// applies without a restart: retention.ms and retention.bytes delete
// whole closed segments below the high watermark (partlog.DeleteRetained)
// where cleanup.policy has delete; segment.bytes (Config.Log's
// SegmentBytes where no level sets it) and segment.ms say when the
// active segment rolls. Leaders and followers apply them alike, as
// Kafka's replicas do; a follower whose log ends before its leader's
// start begins again at that start (fetcher.apply).

// logPolicy is a topic's retention and roll configs.
type logPolicy struct {
	retain       bool // cleanup.policy has delete
	retention    partlog.Retention
	segmentBytes int64
	segmentMs    time.Duration
}

func (m *Manager) logPolicy(topic string) logPolicy {
	var lv configmodel.Levels
	if a := m.getAgent(); a != nil {
		lv = a.TopicLevels(topic)
	}
	num := func(key string, def int64) (int64, kmsg.ConfigSource) {
		r, _ := configmodel.ResolveTopic(key, lv)
		n, err := strconv.ParseInt(r.Value, 10, 64)
		if err != nil {
			return def, r.Source
		}
		return n, r.Source
	}
	var pol logPolicy
	r, _ := configmodel.ResolveTopic("cleanup.policy", lv)
	pol.retain = slices.Contains(configmodel.SplitList(r.Value), "delete")
	pol.retention.Ms, _ = num("retention.ms", 7*24*time.Hour.Milliseconds())
	pol.retention.Bytes, _ = num("retention.bytes", -1)
	var src kmsg.ConfigSource
	pol.segmentBytes, src = num("segment.bytes", 1<<30)
	if src == kmsg.ConfigSourceDefaultConfig && m.cfg.Log.SegmentBytes > 0 {
		pol.segmentBytes = m.cfg.Log.SegmentBytes
	}
	ms, _ := num("segment.ms", 7*24*time.Hour.Milliseconds())
	pol.segmentMs = time.Duration(ms) * time.Millisecond
	return pol
}

// applyLogPolicies applies each replica's topic policy, resolved once
// per topic.
func (m *Manager) applyLogPolicies(parts []*partition, now time.Time) {
	pols := map[string]logPolicy{}
	for _, p := range parts {
		pol, ok := pols[p.tp.Topic]
		if !ok {
			pol = m.logPolicy(p.tp.Topic)
			pols[p.tp.Topic] = pol
		}
		p.applyLogPolicy(m, pol, now)
	}
}

func (p *partition) applyLogPolicy(m *Manager, pol logPolicy, now time.Time) {
	p.mu.Lock()
	l, hw := p.log, p.hw
	p.mu.Unlock()
	if l == nil {
		return
	}
	l.SetRoll(pol.segmentBytes, pol.segmentMs)
	if !pol.retain {
		return
	}
	n, start, err := l.DeleteRetained(pol.retention, hw, now)
	if err != nil {
		if !errors.Is(err, partlog.ErrClosed) {
			m.log.Warn("deleting segments past retention failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
		}
		return
	}
	if n > 0 {
		m.log.Info("deleted segments past retention", "topic", p.tp.Topic, "partition", p.tp.Partition, "segments", n,
			"log_start", start, "retention_ms", pol.retention.Ms, "retention_bytes", pol.retention.Bytes)
		m.notify()
	}
}
