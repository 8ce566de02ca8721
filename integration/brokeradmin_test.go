package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDevBrokersServeAdminAndForgetDeletedTopics runs `ctrlnode dev` and
// talks to its brokers only, as a client bootstrapped at a broker does:
// a topic created through a broker reaches every broker, and once it is
// deleted (through a broker too) no broker's Metadata names it any more,
// to a client asking for every topic or for it by name.
func TestDevBrokersServeAdminAndForgetDeletedTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	base := freePortBase(t, devPorts...)
	dev := startProc(t, "dev", nil, "dev", "--data", t.TempDir(), "--port", strconv.Itoa(base),
		"--log-level", "warn", "--session-timeout", "2s")
	dev.waitLine(t, activeRE, time.Minute)
	var brokers []string
	for i := range 3 {
		brokers = append(brokers, fmt.Sprintf("127.0.0.1:%d", base+300+i))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// each asks every broker, on a connection of its own, for Metadata of
	// every topic and reports whether ok holds for each answer.
	each := func(ok func(md *kmsg.MetadataResponse) bool) bool {
		for _, b := range brokers {
			one, err := kgo.NewClient(kgo.SeedBrokers(b))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := one.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			one.Close()
			if err != nil || !ok(resp.(*kmsg.MetadataResponse)) {
				return false
			}
		}
		return true
	}
	names := func(md *kmsg.MetadataResponse) []string {
		var out []string
		for _, t := range md.Topics {
			if t.Topic != nil {
				out = append(out, *t.Topic)
			}
		}
		return out
	}
	waitFor(t, time.Minute, "every broker to list the three brokers only", func() bool {
		return each(func(md *kmsg.MetadataResponse) bool {
			var ids []int32
			for _, b := range md.Brokers {
				ids = append(ids, b.NodeID)
			}
			slices.Sort(ids)
			return slices.Equal(ids, []int32{1, 2, 3}) && md.ControllerID >= 1 && md.ControllerID <= 3
		})
	})

	for round := range 3 {
		topic := fmt.Sprintf("ghost-%d", round)
		if r, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s through a broker: %v %+v", topic, err, r)
		}
		waitFor(t, time.Minute, topic+" on every broker", func() bool {
			return each(func(md *kmsg.MetadataResponse) bool { return slices.Contains(names(md), topic) })
		})
		if r, err := adm.DeleteTopics(ctx, topic); err != nil || r.Error() != nil {
			t.Fatalf("delete %s through a broker: %v %v", topic, err, r.Error())
		}
		waitFor(t, time.Minute, topic+" gone from every broker", func() bool {
			return each(func(md *kmsg.MetadataResponse) bool { return !slices.Contains(names(md), topic) })
		})
		for _, b := range brokers {
			one, err := kgo.NewClient(kgo.SeedBrokers(b))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := one.SeedBrokers()[0].Request(ctx, req)
			one.Close()
			if err != nil {
				t.Fatal(err)
			}
			if mt := resp.(*kmsg.MetadataResponse).Topics; len(mt) != 1 || mt[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("broker %s asked for %s by name after its deletion: %+v", b, topic, mt)
			}
		}
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
