package listener

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// FuzzHandle decodes arbitrary request bodies the way kafkawire does and
// hands whatever decodes to the listener's handler, without the recover
// that Handle adds in production: any panic fails. Every answer must
// encode and decode back at the request's version. The handler runs
// against a real single-voter controller, so mutations commit.
//
//	go test -run '^$' -fuzz FuzzHandle ./transport/listener
func FuzzHandle(f *testing.F) {
	l := singleVoterListener(f)
	for key, max := range APIs() {
		for v := MinVersions()[key]; v <= max; v++ {
			req := minimalRequest(key)
			req.SetVersion(v)
			f.Add(key, v, req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		max, ok := APIs()[key]
		if !ok || key == 18 || version < MinVersions()[key] || version > max {
			return // kafkawire closes the connection or answers ApiVersions itself
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if err := decode(req, body); err != nil {
			return // kafkawire closes the connection
		}
		if tooBig(req) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := l.handle(ctx, &kafkawire.Conn{ClientID: "fuzz", Version: version}, req)
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("%s v%d took %v: %+v", kmsg.NameForKey(key), version, d, req)
		}
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
		}
		out := req.ResponseKind()
		if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("%s v%d: the response does not decode: %v", kmsg.NameForKey(key), version, err)
		}
	})
}

// decode is kafkawire's decoding of a body: a decoder panic on hostile
// input is an error there, not the handler's concern here.
func decode(req kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return req.ReadFrom(body)
}

// tooBig skips creations of many partitions: they are valid and slow, and
// their cost is the controller's to measure, not this target's.
func tooBig(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			if t.NumPartitions > 1000 || len(t.ReplicaAssignment) > 1000 {
				return true
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			if t.Count > 1000 {
				return true
			}
		}
	}
	return false
}

// singleVoterListener runs a one-voter quorum and its listener, active.
func singleVoterListener(tb testing.TB) *Listener { return singleVoterListenerWith(tb, nil) }

// singleVoterListenerWith is singleVoterListener with the listener's
// configuration adjusted by adjust (when not nil).
func singleVoterListenerWith(tb testing.TB, adjust func(*Config)) *Listener {
	stream, err := raftnet.NewTCPStreamLayer("127.0.0.1:0", "")
	if err != nil {
		tb.Fatal(err)
	}
	n, err := controller.StartNode(controller.NodeConfig{
		NodeID:  1001,
		DataDir: tb.TempDir(),
		Peers:   []controller.Peer{{ID: 1001, Addr: stream.Addr().String()}},
		Logger:  testLogger("fuzz-voter"),
		Voter: func(vc *voter.Config) {
			vc.Stream = stream
			voter.FastTimeouts(vc)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = n.Shutdown() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Listener: ln, Node: n, Logger: testLogger("fuzz-listener")}
	if adjust != nil {
		adjust(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	waitFor(tb, 20*time.Second, "the single voter to be active", func() bool {
		ok, _ := n.Controller.Active()
		return ok
	})
	return l
}
