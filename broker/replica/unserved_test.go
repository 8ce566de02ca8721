package replica_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/server"
)

// Consumer groups and transactions are not served: a broker with data
// leaves their API keys out of ApiVersions and closes a connection that
// sends one anyway, as a Kafka broker does with an API it does not serve.
// A client learns it before it sends anything: franz-go's group consumer
// and transactional producer fail with an error instead of waiting.
func TestGroupAndTransactionAPIsNotServed(t *testing.T) {
	c := newCluster(t, 1, server.BrokerData{})
	c.createTopic("plain", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	unserved := map[int16]string{}
	for _, k := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.ListGroups, kmsg.DescribeGroups, kmsg.DeleteGroups,
		kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit} {
		unserved[int16(k)] = k.Name()
	}
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c.client())
	if err != nil {
		t.Fatal(err)
	}
	served := map[int16]bool{}
	for _, k := range versions.ApiKeys {
		served[k.ApiKey] = true
		if name, ok := unserved[k.ApiKey]; ok {
			t.Errorf("ApiVersions offers %s (%d), which a broker does not serve", name, k.ApiKey)
		}
	}
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.OffsetForLeaderEpoch} {
		if !served[int16(k)] {
			t.Errorf("ApiVersions leaves out %s (%d)", k.Name(), k)
		}
	}

	// FindCoordinator sent anyway, on a connection whose ApiVersions was
	// answered: no answer, the connection is closed.
	addr := c.seeds()[0]
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(frame(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(conn); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 3
	find.CoordinatorKey = "g"
	if _, err := conn.Write(frame(find, 2)); err != nil {
		t.Fatal(err)
	}
	if b, err := readFrame(conn); err == nil {
		t.Fatalf("FindCoordinator answered (%d bytes); want the connection closed", len(b))
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("FindCoordinator: %v; want the connection closed", err)
	}

	// franz-go's group consumer: its FindCoordinator fails at once.
	group := c.client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("plain"), kgo.RequestRetries(0))
	var groupErr error
	for groupErr == nil && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		group.PollFetches(pctx).EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				groupErr = err
			}
		})
		pcancel()
	}
	if !tooOld(groupErr) {
		t.Fatalf("group consumer: %v; want franz-go's error for an API the broker does not offer", groupErr)
	}

	// Its transactional producer: InitProducerID fails, nothing is
	// written.
	txn, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "plain", Partition: 0, Value: []byte("in a transaction")}
	if err := txn.ProduceSync(ctx, r).FirstErr(); !tooOld(err) {
		t.Fatalf("transactional produce: %v; want franz-go's error for an API the broker does not offer", err)
	}
	ends, err := kadm.NewClient(c.client()).ListEndOffsets(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("plain", 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("partition plain-0 ends at %d (%v); want nothing written", o.Offset, o.Err)
	}
}

// tooOld reports whether err is franz-go's answer to a request whose API
// key the broker's ApiVersions left out (an unexported error of kgo's).
func tooOld(err error) bool {
	return err != nil && strings.Contains(err.Error(), "broker is too old")
}

// frame encodes a request with a v1 header (client id "raw").
func frame(r kmsg.Request, correlation int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(r.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(r.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlation))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "raw"...)
	if r.IsFlexible() {
		b = append(b, 0) // no tagged fields
	}
	b = r.AppendTo(b)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// readFrame reads one size-prefixed response.
func readFrame(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}
