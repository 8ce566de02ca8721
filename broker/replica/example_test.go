package replica_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// loopback returns a free host:port on 127.0.0.1.
func loopback() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A broker written against the embedding API: the replica manager is the
// agent's Host (it runs what the controller decides) and its Service (it
// serves Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch on the
// agent's listener), so clients, the controller and other brokers'
// followers all use the one port. The controller here is a quorum of one
// voter in the same process.
func Example() {
	dir, _ := os.MkdirTemp("", "ctrlquorum-broker-example-")
	defer os.RemoveAll(dir)

	raftAddr, ctrlAddr := loopback(), loopback()
	voters := []server.VoterPeer{{ID: 1001, Raft: raftAddr, Listener: ctrlAddr}}
	if _, err := server.FormatVoters("", voters, map[int32]string{1001: filepath.Join(dir, "voter")}); err != nil {
		fmt.Println(err)
		return
	}
	voter, err := server.Start(server.Config{
		NodeID: 1001, Voter: true, RaftAddr: raftAddr, Listener: ctrlAddr, DataDir: filepath.Join(dir, "voter"), Voters: voters,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer voter.Stop(context.Background())

	// The broker: a replica manager, an agent that hands it the
	// controller's requests and serves its APIs, and the manager told of
	// the agent (for leaders' addresses and ISR changes).
	rm, err := replica.New(replica.Config{BrokerID: 1, DataDir: filepath.Join(dir, "data")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rm.Close()
	agent, err := broker.Start(broker.Config{
		BrokerID: 1, Listener: "127.0.0.1:0", Controllers: []string{ctrlAddr},
		HeartbeatInterval: 200 * time.Millisecond, Host: rm, Service: rm,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rm.Attach(agent)
	defer agent.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, _ := kgo.NewClient(kgo.SeedBrokers(ctrlAddr))
	defer admin.Close()
	for st := agent.Status(); ctx.Err() == nil && (!st.Registered || st.Fenced); st = agent.Status() {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "greetings"); err != nil {
		fmt.Println(err)
		return
	}

	cl, _ := kgo.NewClient(kgo.SeedBrokers(agent.Addr()), kgo.DisableIdempotentWrite(),
		kgo.ConsumeTopics("greetings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	r := &kgo.Record{Topic: "greetings", Value: []byte("hello")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("produced %q at offset %d\n", r.Value, r.Offset)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.NumRecords() > 0 {
			got := fs.Records()[0]
			fmt.Printf("consumed %q at offset %d\n", got.Value, got.Offset)
			return
		}
	}
	fmt.Println("nothing consumed:", ctx.Err())
	// Output:
	// produced "hello" at offset 0
	// consumed "hello" at offset 0
}
