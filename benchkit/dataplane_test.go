package benchkit

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunData runs the data path's scenarios small: a controller failover
// fails no produce, every partition the killed broker led takes a produce
// again, and a controlled shutdown fails no produce (the producer's
// retries carry it to the new leaders).
func TestRunData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunData(ctx, DataConfig{Partitions: 6, SessionTimeout: time.Second, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.KilledLed == 0 || len(rep.Recovery) != rep.KilledLed {
		t.Fatalf("killed broker led %d partitions, %d recoveries measured", rep.KilledLed, len(rep.Recovery))
	}
	if rep.ShutdownProduces == 0 || rep.ShutdownFailed != 0 {
		t.Fatalf("controlled shutdown: %d of %d produces failed", rep.ShutdownFailed, rep.ShutdownProduces)
	}
	// The data path does not go through the controller: its failover
	// fails no produce.
	if rep.FailoverProduces == 0 || rep.FailoverFailed != 0 {
		t.Fatalf("controller failover: %d of %d produces failed", rep.FailoverFailed, rep.FailoverProduces)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	if !strings.Contains(b.String(), "broker killed") {
		t.Fatalf("table:\n%s", b.String())
	}
}
