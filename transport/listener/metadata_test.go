package listener

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataIDs returns the node ids of a Metadata answer's broker list.
func metadataIDs(md *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// TestVoterMetadataListsBrokers checks the broker list a voter's Metadata
// gives clients: the voters, with the active one as controller, while no
// live broker exists (an empty cluster, or every broker fenced), and the
// live brokers only, with a live broker as controller, as soon as one
// exists, from every voter; a client bootstrapped at a voter then sends
// its requests to the brokers.
func TestVoterMetadataListsBrokers(t *testing.T) {
	c := newTestCluster(t, clusterOpts{stable: true})
	ctx := ctxT(t)
	// everyVoterSays waits until every voter's Metadata lists wantIDs
	// with wantController as controller, naming the last answer that did
	// not if none ever does.
	everyVoterSays := func(what string, wantIDs []int32, wantController func() int32) {
		t.Helper()
		var last string
		defer func() {
			if t.Failed() {
				t.Logf("last answer: %s", last)
			}
		}()
		waitFor(t, 30*time.Second, what, func() bool {
			for _, addr := range c.addrs() {
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(req.MaxVersion())
				resp, err := call(ctx, addr, "test", req)
				if err != nil {
					last = err.Error()
					return false
				}
				md := resp.(*kmsg.MetadataResponse)
				if ids := metadataIDs(md); !slices.Equal(ids, wantIDs) || md.ControllerID != wantController() {
					last = fmt.Sprintf("voter at %s: brokers %v controller %d", addr, ids, md.ControllerID)
					return false
				}
			}
			return true
		})
	}
	activeID := func() int32 { return c.ids[c.active(10*time.Second)] }

	everyVoterSays("an empty cluster's voters to list themselves", []int32{1001, 1002, 1003}, activeID)

	c.startBrokers(2)
	everyVoterSays("the voters to list the live brokers only", []int32{1, 2}, func() int32 { return 1 })

	// A client bootstrapped at a voter is sent to the brokers.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()[0]), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	before := c.broker(1).served.Load() + c.broker(2).served.Load()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, "through-brokers"); err != nil {
		t.Fatal(err)
	}
	if after := c.broker(1).served.Load() + c.broker(2).served.Load(); after == before {
		t.Fatal("a client bootstrapped at a voter sent no request to a broker")
	}

	// Broker 1 fenced: broker 2 is the one live broker and controller.
	c.broker(1).wantFence.Store(true)
	everyVoterSays("the voters to drop the fenced broker", []int32{2}, func() int32 { return 2 })

	// Every broker fenced: the voters again, so that admin tools can
	// still bootstrap.
	c.broker(2).wantFence.Store(true)
	everyVoterSays("the voters to list themselves while no broker is live", []int32{1001, 1002, 1003}, activeID)

	c.broker(1).wantFence.Store(false)
	c.broker(2).wantFence.Store(false)
	everyVoterSays("the voters to list the brokers once they are live again", []int32{1, 2}, func() int32 { return 1 })
}
