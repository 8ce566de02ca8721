package check

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The active controller fences a broker at once when its listener refuses
// a connection after its connection reset (controller/cluster_refusal.go):
// proof that its process died. RefusalFences checks that proof was never
// taken for a live process, under any nemesis (a partition times out, a
// paused process still accepts connections, a flapping broker still
// listens), and measures how soon a crashed broker is fenced.

// Fence is a fence the active controller logged.
type Fence struct {
	Broker int32
	Epoch  int64
	Time   time.Time
	// Refused: fenced because its listener refused a connection after its
	// connection reset; otherwise its session expired.
	Refused bool
}

// Registration is a broker process registering an epoch, as its agent
// logged it.
type Registration struct {
	Broker int32
	Epoch  int64
	Time   time.Time
}

// BrokerKill is the nemesis killing the process a broker runs in (a
// broker crash, or a kill, power loss or replacement of its voter's
// process). Time is when the fault was recorded, once the process was
// gone: the kill happened at most a moment before.
type BrokerKill struct {
	Broker int32
	Kind   string
	Time   time.Time
	// Healed is when its heal was recorded (zero: never).
	Healed time.Time
}

// killSlack is how long before a kill's recorded time a fence of the
// process it killed may come: the kill is recorded once the process is
// gone, after the signal that the controller may have seen first.
const killSlack = 2 * time.Second

// CrashWindowKind is the fault whose windows RefusalFences measures.
const CrashWindowKind = "broker-crash"

// RefusalFences checks every refusal fence against the kills: a fence
// of broker B at epoch E for a refused listener at time T is valid only
// if B's process was killed after it registered E and before T (within
// killSlack). It notes, for each broker crash, the time from the kill to
// B's fence, beside the session timeout.
func RefusalFences(fences []Fence, regs []Registration, kills []BrokerKill, session time.Duration) Result {
	r := newResult("RefusalFences")
	refused := 0
	for _, f := range fences {
		if !f.Refused {
			continue
		}
		refused++
		var since time.Time // registration of the fenced epoch
		for _, g := range regs {
			if g.Broker == f.Broker && g.Epoch == f.Epoch && !g.Time.After(f.Time) && g.Time.After(since) {
				since = g.Time
			}
		}
		killed := slices.ContainsFunc(kills, func(k BrokerKill) bool {
			return k.Broker == f.Broker && k.Time.After(since) && !k.Time.After(f.Time.Add(killSlack))
		})
		if !killed {
			what := "registered"
			if since.IsZero() {
				what = "registered (no registration of that epoch logged: since the run began)"
			}
			r.add(Violation{Partition: -1, Time: f.Time, Brokers: []int32{f.Broker},
				Description: fmt.Sprintf("broker %d was fenced at %s (epoch %d) because its listener refused a connection, but its process was not killed since it %s at %s: a live broker was fenced",
					f.Broker, f.Time.Format("15:04:05.000"), f.Epoch, what, since.Format("15:04:05.000"))})
		}
	}

	var windows []time.Duration
	byRefusal, unfenced := 0, 0
	crashes := 0
	for _, k := range kills {
		if k.Kind != CrashWindowKind {
			continue
		}
		crashes++
		var first *Fence
		for i, f := range fences {
			if f.Broker != k.Broker || f.Time.Before(k.Time.Add(-killSlack)) || (!k.Healed.IsZero() && f.Time.After(k.Healed)) {
				continue
			}
			if first == nil || f.Time.Before(first.Time) {
				first = &fences[i]
			}
		}
		if first == nil {
			unfenced++
			continue
		}
		windows = append(windows, max(0, first.Time.Sub(k.Time)))
		if first.Refused {
			byRefusal++
		}
	}
	r.Checked = fmt.Sprintf("%d fences for a refused listener, %d broker crashes", refused, crashes)
	if len(windows) > 0 {
		slices.Sort(windows)
		// Nearest rank: the smallest window with at least p of them at or below it.
		q := func(p float64) time.Duration {
			return windows[max(0, min(len(windows)-1, int(math.Ceil(p*float64(len(windows))))-1))]
		}
		r.Notes = append(r.Notes, fmt.Sprintf("broker crash → fence (kill -9 to the controller's fence): median %s, p99 %s, max %s over %d crashes (%d fenced for a refused listener, %d by session expiry; session timeout %s)",
			q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), windows[len(windows)-1].Round(time.Millisecond),
			len(windows), byRefusal, len(windows)-byRefusal, session))
	}
	if unfenced > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d broker crashes with no fence logged before the broker's restart (its new registration fenced the old incarnation)", unfenced))
	}
	return r
}
