package listener

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStandbyReadsAfterActiveRestart: a standby answers Metadata with a
// topic created through the active controller the moment the creation is
// answered, over the connection it keeps to the active voter for the
// read index; after the active voter is stopped and started again (the
// kept connection broken), a standby again sees each new topic at once.
func TestStandbyReadsAfterActiveRestart(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	c.waitBrokers(3)
	// Created at the active controller itself, found as a broker finds
	// it: a voter's Metadata names a broker as controller.
	cl := c.client()
	ctx := ctxT(t)
	sees := func(i int, topic string) bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := call(ctx, c.listener(i).Addr().String(), "reader", req)
		if err != nil {
			t.Fatalf("Metadata at voter %d: %v", c.ids[i], err)
		}
		mr := resp.(*kmsg.MetadataResponse)
		return len(mr.Topics) == 1 && mr.Topics[0].ErrorCode == 0
	}
	check := func(round int) {
		t.Helper()
		active := c.active(30 * time.Second)
		for k := range 5 {
			topic := fmt.Sprintf("ri-%d-%d", round, k)
			waitFor(t, 30*time.Second, "the creation of "+topic, func() bool {
				req := kmsg.NewPtrCreateTopicsRequest()
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
				req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10_000
				resp, err := c.toController(ctx, cl, req)
				return err == nil && resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode == 0
			})
			for i := range c.ids {
				if i != active && !sees(i, topic) {
					t.Fatalf("round %d: standby %d does not see %s right after its creation was answered", round, c.ids[i], topic)
				}
			}
		}
	}
	check(0)
	a := c.active(30 * time.Second)
	c.stop(a)
	c.start(a, nil, nil)
	check(1)
}
