package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// loopbackAddr returns a free host:port on 127.0.0.1.
func loopbackAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A broker process that embeds a controller voter: one Start call gives it
// a voter of the quorum (here a quorum of one), the controller's Kafka
// listener, and the broker agent that registers with whichever voter is
// active. A three-voter deployment lists all three in Voters.
func Example() {
	dir, _ := os.MkdirTemp("", "ctrlquorum-example-")
	defer os.RemoveAll(dir)
	raftAddr, listen := loopbackAddr(), loopbackAddr()
	voters := []server.VoterPeer{{ID: 1001, Raft: raftAddr, Listener: listen}}

	// A data directory is formatted before its node first starts: it
	// names the cluster and the initial voters (`ctrlnode format`).
	if _, err := server.FormatVoters("", voters, map[int32]string{1001: dir}); err != nil {
		fmt.Println(err)
		return
	}
	s, err := server.Start(server.Config{
		NodeID: 1001, Voter: true, Broker: true,
		RaftAddr: raftAddr, Listener: listen, DataDir: dir, Voters: voters,
		BrokerID: 1, BrokerListener: loopbackAddr(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop(context.Background())

	// Wait until the broker is registered and unfenced.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		live := false
		s.Node.FSM.View(func(im *fsm.Image) {
			b := im.Broker(1)
			live = b != nil && !b.Fenced
		})
		if live {
			fmt.Println("broker 1 is live; clients bootstrap from the listener")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("broker 1 did not come up")
	// Output: broker 1 is live; clients bootstrap from the listener
}
