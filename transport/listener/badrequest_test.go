package listener

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// TestBadRequestsChangeNothing sends requests a real cluster refuses and
// checks each gets the error Kafka gives and leaves the state as it was:
// the active voter's state hash and applied index are the same after as
// before.
func TestBadRequestsChangeNothing(t *testing.T) {
	c := newTestCluster(t, clusterOpts{stable: true})
	c.startBrokers(3)
	cl, adm := c.admin()
	ctx := ctxT(t)

	// The fixtures: a healthy topic, and one whose preferred replica is
	// on broker 4, registered but never heartbeating, so always fenced.
	if res, err := adm.CreateTopics(ctx, 3, 3, nil, "existing"); err != nil || res.Error() != nil {
		t.Fatalf("%v %v", err, res.Error())
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.ClusterID, reg.IncarnationID = 4, testClusterID, [16]byte{4}
	if r := c.toControllerRetry(t, cl, reg, regCode).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	createRaw(t, cl, "preferred-fenced", [][]int32{{4, 1}})
	c.converged(20 * time.Second)

	create := func(name string, partitions int32, rf int16, configs map[string]string, assignment [][]int32) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
			for k, v := range configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
				rt.Configs = append(rt.Configs, cfg)
			}
			for i, r := range assignment {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = int32(i), r
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].ErrorCode
		}
	}
	createParts := func(name string, count int32) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = name, count
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].ErrorCode
		}
	}
	elect := func(typ int8, topic string, part int32) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrElectLeadersRequest()
			req.ElectionType = typ
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{part}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	heartbeat := func(epochDelta int64) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrBrokerHeartbeatRequest()
			req.BrokerID, req.BrokerEpoch = 1, c.broker(1).epoch.Load()+epochDelta
			return c.toControllerRetry(t, cl, req, hbCode).(*kmsg.BrokerHeartbeatResponse).ErrorCode
		}
	}
	alterPartition := func(brokerEpochDelta int64, partitionEpochDelta int32) func() int16 {
		return func() int16 {
			i := c.active(10 * time.Second)
			p, _ := c.partition(i, "existing", 0)
			req := kmsg.NewPtrAlterPartitionRequest()
			req.SetVersion(1) // topic names: the form before topic ids
			req.BrokerID, req.BrokerEpoch = p.Leader, c.broker(p.Leader).epoch.Load()+brokerEpochDelta
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.Topic = "existing"
			rp := kmsg.NewAlterPartitionRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = 0, p.LeaderEpoch, p.PartitionEpoch+partitionEpochDelta, []int32{p.Leader}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			// Sent raw: kgo would raise the version to one with topic ids.
			r, err := call(ctx, c.listener(i).Addr().String(), "test", req)
			if err != nil {
				t.Fatal(err)
			}
			resp := r.(*kmsg.AlterPartitionResponse)
			if resp.ErrorCode != 0 {
				return resp.ErrorCode
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	register := func(id int32, incarnation byte, cluster string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrBrokerRegistrationRequest()
			req.BrokerID, req.ClusterID, req.IncarnationID = id, cluster, [16]byte{incarnation, 0xee}
			return c.toControllerRetry(t, cl, req, regCode).(*kmsg.BrokerRegistrationResponse).ErrorCode
		}
	}
	describeConfigs := func(topic string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Resources[0].ErrorCode
		}
	}
	alterConfig := func(topic, key, value string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = key, kmsg.StringPtr(value)
			rr.Configs = append(rr.Configs, cfg)
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Resources[0].ErrorCode
		}
	}
	unregister := func(id int32) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrUnregisterBrokerRequest()
			req.BrokerID = id
			return c.toControllerRetry(t, cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }).(*kmsg.UnregisterBrokerResponse).ErrorCode
		}
	}

	cases := []badCase{
		{"replication factor above the live brokers", create("too-wide", 1, 4, nil, nil), kerr.InvalidReplicationFactor},
		{"replication factor zero", create("rf-zero", 1, 0, nil, nil), kerr.InvalidReplicationFactor},
		{"topic exists", create("existing", 1, 1, nil, nil), kerr.TopicAlreadyExists},
		{"topic name with a slash", create("bad/name", 1, 1, nil, nil), kerr.InvalidTopicException},
		{"topic name too long", create(string(make([]byte, 250)), 1, 1, nil, nil), kerr.InvalidTopicException},
		{"zero partitions", create("no-parts", 0, 1, nil, nil), kerr.InvalidPartitions},
		{"partitions beyond the limit", create("huge", maxPartitionsPerTopic+1, 1, nil, nil), kerr.InvalidPartitions},
		{"unknown config", create("bad-config", 1, 1, map[string]string{"no.such.config": "1"}, nil), kerr.InvalidConfig},
		{"null config value", func() int16 {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "null-config", 1, 1
			rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms"}}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].ErrorCode
		}, kerr.InvalidConfig},
		{"assignment with a gap in partition numbers", func() int16 {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "gap", -1, -1
			rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}, {Partition: 2, Replicas: []int32{2}}}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].ErrorCode
		}, kerr.InvalidReplicaAssignment},
		{"assignment on an unknown broker", create("bad-assignment", -1, -1, nil, [][]int32{{1, 99}}), kerr.InvalidReplicaAssignment},
		{"shrinking partitions", createParts("existing", 2), kerr.InvalidPartitions},
		{"partitions of an unknown topic", createParts("missing", 5), kerr.UnknownTopicOrPartition},
		{"election on an unknown topic", elect(0, "missing", 0), kerr.UnknownTopicOrPartition},
		{"election on an unknown partition", elect(0, "existing", 7), kerr.UnknownTopicOrPartition},
		{"preferred replica leads already", elect(0, "existing", 0), kerr.ElectionNotNeeded},
		{"unclean election with a live leader", elect(1, "existing", 1), kerr.ElectionNotNeeded},
		{"preferred replica fenced", elect(0, "preferred-fenced", 0), kerr.PreferredLeaderNotAvailable},
		{"configs of an unknown topic", describeConfigs("missing"), kerr.UnknownTopicOrPartition},
		{"bad config value", alterConfig("existing", "min.insync.replicas", "0"), kerr.InvalidConfig},
		{"alter configs of an unknown topic", alterConfig("missing", "retention.ms", "1"), kerr.UnknownTopicOrPartition},
		{"heartbeat with a stale broker epoch", heartbeat(-1), kerr.StaleBrokerEpoch},
		{"AlterPartition with a stale broker epoch", alterPartition(-1, 0), kerr.StaleBrokerEpoch},
		{"AlterPartition with a stale partition epoch", alterPartition(0, -1), kerr.InvalidUpdateVersion},
		{"registration over a live session", register(1, 9, testClusterID), kerr.DuplicateBrokerRegistration},
		{"registration from another cluster", register(5, 1, "other-cluster"), kerr.InconsistentClusterID},
		{"registration under a voter's id", register(1002, 1, testClusterID), kerr.InvalidRequest},
		{"unregistering an unknown broker", unregister(77), kerr.BrokerIDNotRegistered},
		{"ApiVersions newer than any served", func() int16 {
			// Answered in a v0 body listing what is served, so the
			// client can retry with a version it finds there.
			raw := rawFrame(t, c.addrs()[0], 18, 99, nil)
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(0)
			if err := resp.ReadFrom(raw); err != nil || len(resp.ApiKeys) != len(APIs()) {
				t.Fatalf("%+v %v", resp, err)
			}
			return resp.ErrorCode
		}, kerr.UnsupportedVersion},
	}
	cases = append(cases, reassignmentBadRequests(t, c, cl)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Both states are read on one leader in one term: a new
			// leader commits records of its own, and a request sent while
			// leadership moves may meet NOT_CONTROLLER. If it moved anyway,
			// the case runs again from its start on the new leader.
			const attempts = 5
			for attempt := 1; ; attempt++ {
				lead := c.stableActive(30 * time.Second)
				before, idx := c.node(lead.i).FSM.StateHash()
				got := tc.send()
				flushed := c.raftHeld(lead.i, lead.term) // whatever the request committed is applied
				after, idx2 := c.node(lead.i).FSM.StateHash()
				if !flushed || !c.held(lead) {
					if attempt == attempts {
						t.Fatalf("leadership moved during each of %d attempts", attempts)
					}
					t.Logf("leadership of voter %d (term %d) moved during the request: sending it again", c.ids[lead.i], lead.term)
					continue
				}
				if got != tc.want.Code {
					t.Errorf("got %v, want %s", kerr.ErrorForCode(got), tc.want.Message)
				}
				if after != before || idx2 != idx {
					t.Errorf("state changed: index %d -> %d", idx, idx2)
				}
				return
			}
		})
	}

	// Nothing the table sent left a trace on any voter either.
	var fenced bool
	c.view(c.active(10*time.Second), func(im *fsm.Image) {
		fenced = im.Broker(4).Fenced
		if im.TopicByName("too-wide") != nil || im.Broker(5) != nil || im.Broker(1002) != nil {
			t.Error("a refused request left a trace")
		}
	})
	if !fenced {
		t.Error("broker 4 was unfenced")
	}
	c.converged(20 * time.Second)
}

// badCase is one refused request: send returns the error code it got.
type badCase struct {
	name string
	send func() int16
	want *kerr.Error
}

func regCode(r kmsg.Response) int16 { return r.(*kmsg.BrokerRegistrationResponse).ErrorCode }
func hbCode(r kmsg.Response) int16  { return r.(*kmsg.BrokerHeartbeatResponse).ErrorCode }

// rawFrame sends one request frame with a v1 header and returns the
// response body after the correlation id (nil if the connection closed).
func rawFrame(t *testing.T, addr string, key, version int16, body []byte) []byte {
	t.Helper()
	msg := binary.BigEndian.AppendUint16(nil, uint16(key))
	msg = binary.BigEndian.AppendUint16(msg, uint16(version))
	msg = binary.BigEndian.AppendUint32(msg, 7)
	msg = binary.BigEndian.AppendUint16(msg, 0xffff)
	msg = append(msg, body...)
	return sendFrame(t, addr, msg)
}
