package broker_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// FuzzAgentRequest feeds arbitrary bodies of the requests an agent serves
// through kmsg's decoder (as the listener does) and, when they decode,
// through the agent's handling: nothing may panic, and every answer must
// encode. One agent serves every input, so state from earlier inputs
// (controller epochs, cached partitions) shapes the later ones.
func FuzzAgentRequest(f *testing.F) {
	keys := []int16{broker.KeyLeaderAndIsr, broker.KeyStopReplica, broker.KeyUpdateMetadata, 3}
	seed := func(key int16, req kmsg.Request) {
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(uint8(key), v, kafkaclient.ControlClientID(1, 42), req.AppendTo(nil))
		}
	}
	reps := []int32{1, 2}
	seed(broker.KeyLeaderAndIsr, lai(3, -1, part{topic: "a", id: topicA, p: 0, leader: 1, le: 2, pe: 2, isr: reps, reps: reps}))
	seed(broker.KeyUpdateMetadata, um(3, -1, []liveBroker{{1, "127.0.0.1:9092"}}, part{topic: "a", id: topicA, p: 1, leader: -2, le: 2, isr: reps, reps: reps}))
	seed(broker.KeyStopReplica, stopReq(3, -1, "a", 0, 2, true))
	seed(3, kmsg.NewPtrMetadataRequest())
	f.Add(uint8(4), int16(7), "ctrlquorum-controller-x;offset=-1", []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})

	a, err := broker.Start(broker.Config{BrokerID: 1, Listener: "127.0.0.1:0", ControlLogLimit: 1000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })

	f.Fuzz(func(t *testing.T, k uint8, version int16, clientID string, body []byte) {
		key := keys[int(k)%len(keys)]
		req := kmsg.RequestForKey(key)
		if version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if err := kafkaclient.SafeRead(req, body); err != nil {
			return // the listener closes the connection
		}
		resp, err := a.Handle(context.Background(), &kafkawire.Conn{ClientID: clientID, Version: version}, req)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
		}
		resp.SetVersion(version)
		out := resp.AppendTo(nil)
		back := req.ResponseKind()
		back.SetVersion(version)
		if err := back.ReadFrom(out); err != nil {
			t.Fatalf("%s v%d: response does not decode: %v", kmsg.NameForKey(key), version, err)
		}
		_ = a.Partitions()
		_ = a.ControlLog()
	})
}
