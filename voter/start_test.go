package voter_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

func TestStartRejectsIncompleteConfig(t *testing.T) {
	dir := t.TempDir()
	fsm := newListFSM("1")
	self := raft.Server{ID: "1", Address: "127.0.0.1:1"}
	cases := []struct {
		name string
		cfg  voter.Config
		want string
	}{
		{"no id", voter.Config{BindAddr: "127.0.0.1:0", DataDir: dir, FSM: fsm}, "NodeID"},
		{"no dir", voter.Config{NodeID: "1", BindAddr: "127.0.0.1:0", FSM: fsm}, "DataDir"},
		{"no fsm", voter.Config{NodeID: "1", BindAddr: "127.0.0.1:0", DataDir: dir}, "FSM"},
		{"no address", voter.Config{NodeID: "1", DataDir: dir, FSM: fsm}, "BindAddr"},
		{"self not in peers", voter.Config{NodeID: "2", BindAddr: "127.0.0.1:0", DataDir: dir, FSM: fsm,
			Peers: []raft.Server{self}}, "do not include"},
		{"unroutable advertise", voter.Config{NodeID: "1", BindAddr: "0.0.0.0:0", DataDir: dir, FSM: fsm}, "not routable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := voter.Start(tc.cfg)
			if err == nil {
				_ = v.Shutdown()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// A failed Start must release what it opened: the stream it was given and
// the bolt file lock, or the next attempt on the same directory would hang.
func TestFailedStartReleasesResources(t *testing.T) {
	dir := t.TempDir()
	stream, err := raftnet.NewTCPStreamLayer("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	addr := raft.ServerAddress(stream.Addr().String())
	_, err = voter.Start(voter.Config{
		NodeID: "1", Stream: stream, DataDir: dir, FSM: newListFSM("1"),
		Peers: []raft.Server{{ID: "1", Address: "127.0.0.1:1"}},
	})
	if err == nil || !strings.Contains(err.Error(), "advertises") {
		t.Fatalf("Start with a wrong self address: %v, want an address mismatch", err)
	}
	if _, err := stream.Accept(); err == nil {
		t.Fatal("stream still accepts after failed Start")
	}

	cfg := voter.Config{
		NodeID: "1", BindAddr: string(addr), DataDir: dir, FSM: newListFSM("1"),
		Peers: []raft.Server{{ID: "1", Address: addr}},
	}
	voter.FastTimeouts(&cfg)
	v, err := voter.Start(cfg)
	if err != nil {
		t.Fatalf("Start after a failed one: %v", err)
	}
	defer v.Shutdown()
	waitLeaderEvent(t, v, true)
	if err := v.Apply([]byte(payload(0)), applyTimeout).Error(); err != nil {
		t.Fatalf("apply on single voter: %v", err)
	}
}
