package listener

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestFailoverKeepsAcknowledgedTopics creates topics from several kadm
// clients while the active voter is stopped: the clients' own retries
// carry them over to the new active controller, and every creation that
// was acknowledged is there, under the id it was acknowledged with. The
// stopped voter then restarts and all three converge.
func TestFailoverKeepsAcknowledgedTopics(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	ctx := ctxT(t)

	var (
		mu sync.Mutex
		// acked: created, with the id the answer carried.
		acked = map[string]kadm.TopicID{}
		// existed: TOPIC_ALREADY_EXISTS for a name only this writer
		// uses, so an earlier attempt whose answer was lost (the
		// voter stopped mid-request) created it.
		existed = map[string]bool{}
		// failed: any other answer; each must be explainable.
		failed = map[string]error{}
	)
	var count atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		_, adm := c.admin()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%05d", w, i)
				res, err := adm.CreateTopics(ctx, 1, 3, nil, name)
				mu.Lock()
				switch {
				case err != nil:
					failed[name] = err
				case res[name].Err == nil:
					acked[name] = res[name].ID
					count.Add(1)
				case errors.Is(res[name].Err, kerr.TopicAlreadyExists):
					existed[name] = true
				default:
					failed[name] = res[name].Err
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 30*time.Second, "creations before the failover", func() bool { return count.Load() >= 40 })
	old := c.active(10 * time.Second)
	stoppedAt := count.Load()
	c.stop(old)
	waitFor(t, 60*time.Second, "creations after the failover", func() bool { return count.Load() >= stoppedAt+40 })
	close(stop)
	wg.Wait()

	now := c.active(10 * time.Second)
	if now == old {
		t.Fatal("the stopped voter is still active")
	}
	for name, err := range failed {
		// A request that ran out of time has an unknown outcome; it is
		// the only acceptable failure.
		if !errors.Is(err, kerr.RequestTimedOut) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v", name, err)
		}
	}
	check := func(i int) {
		c.view(i, func(im *fsm.Image) {
			for name, id := range acked {
				tp := im.TopicByName(name)
				if tp == nil || tp.ID != rl.TopicID(id) {
					t.Errorf("voter %d: acknowledged topic %s is missing or has another id", c.ids[i], name)
				}
			}
			for name := range existed {
				if im.TopicByName(name) == nil {
					t.Errorf("voter %d: %s was answered TOPIC_ALREADY_EXISTS but does not exist", c.ids[i], name)
				}
			}
		})
	}
	check(now)
	t.Logf("%d creations acknowledged (%d after the stop), %d already existed after a retry, %d timed out",
		len(acked), count.Load()-stoppedAt, len(existed), len(failed))

	c.start(old, nil, nil)
	c.converged(60 * time.Second)
	check(old)
}
