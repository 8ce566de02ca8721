package check

import (
	"strings"
	"testing"
	"time"
)

// TestRefusalFences: a refusal fence after the broker's process was
// killed is valid, also for the epoch of a process killed before a
// restart that registered a new one; a refusal fence of a process never
// killed since it registered the fenced epoch is a violation; session
// expiries are never violations; the crash windows are noted.
func TestRefusalFences(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	regs := []Registration{
		{Broker: 4, Epoch: 10, Time: at(1)},
		{Broker: 5, Epoch: 11, Time: at(1)},
		{Broker: 6, Epoch: 12, Time: at(1)},
		{Broker: 4, Epoch: 40, Time: at(20)}, // broker 4 restarted
	}
	kills := []BrokerKill{
		{Broker: 4, Kind: "broker-crash", Time: at(10), Healed: at(18)},
		{Broker: 6, Kind: "broker-crash", Time: at(30), Healed: at(35)},
	}
	fences := []Fence{
		{Broker: 4, Epoch: 10, Time: at(10.1), Refused: true}, // just after the kill
		{Broker: 4, Epoch: 10, Time: at(21), Refused: true},   // a late report of the old epoch, after the restart
		{Broker: 6, Epoch: 12, Time: at(31), Refused: false},  // a session expiry
		{Broker: 5, Epoch: 11, Time: at(12), Refused: false},  // heartbeats flapped: a session expiry
	}
	r := RefusalFences(fences, regs, kills, time.Second)
	if !r.Valid {
		t.Fatalf("valid fences found invalid: %s", r)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "median 100ms, p99 1s, max 1s") || !strings.Contains(notes, "over 2 crashes (1 fenced for a refused listener, 1 by session expiry") {
		t.Fatalf("crash windows: %s", r)
	}

	for _, bad := range []Fence{
		{Broker: 5, Epoch: 11, Time: at(12), Refused: true}, // never killed
		{Broker: 4, Epoch: 40, Time: at(25), Refused: true}, // the restarted process, alive
		{Broker: 6, Epoch: 12, Time: at(20), Refused: true}, // ten seconds before its kill
		{Broker: 7, Epoch: 99, Time: at(20), Refused: true}, // no registration, no kill
	} {
		r := RefusalFences(append(fences, bad), regs, kills, time.Second)
		if r.Valid || len(r.Violations) != 1 || r.Violations[0].Brokers[0] != bad.Broker {
			t.Fatalf("fence %+v: %s", bad, r)
		}
	}
}
