package check

import (
	"slices"
	"strings"
	"testing"
)

// metaRead is a settled cluster: the active controller 1002 with two
// topics, and brokers 1 and 4 that agree with it.
func metaRead() *BrokerMetadataRead {
	topics := func() []MetaTopic {
		return []MetaTopic{
			{Name: "jt-0001", ID: "aa", Partitions: []MetaPartition{
				{Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 4}, ISR: []int32{1, 4}},
				{Partition: 1, Leader: 4, LeaderEpoch: 1, Replicas: []int32{4, 1}, ISR: []int32{4, 1}},
			}},
			{Name: "jt-0002", ID: "bb", Partitions: []MetaPartition{
				{Partition: 0, Leader: 4, LeaderEpoch: 7, Replicas: []int32{4}, ISR: []int32{4}},
			}},
		}
	}
	return &BrokerMetadataRead{
		Controller: MetadataView{Node: 1002, Addr: "127.0.0.2:9092", Time: at(0), Brokers: []int32{1, 4}, Topics: topics()},
		Brokers: []MetadataView{
			{Node: 4, Addr: "127.0.0.1:9396", Time: at(1), Brokers: []int32{1, 4}, Topics: topics()},
			{Node: 1, Addr: "127.0.0.1:9395", Time: at(1), Brokers: []int32{1, 4}, Topics: topics()},
		},
		Reads: 3, Waited: 1500 * 1e6,
	}
}

func TestBrokerMetadataAgreeing(t *testing.T) {
	r := BrokerMetadata(metaRead())
	if !r.Valid || r.Inconclusive != "" {
		t.Fatalf("agreeing brokers: %s", r)
	}
	for _, want := range []string{"2 brokers read, 2 topics and 3 partitions of the active controller 1002 compared with each (6 partition states compared)",
		"read 3 times over 1.5s", "until the brokers agreed"} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("result lacks %q:\n%s", want, r)
		}
	}

	// The ISR in another order is the same ISR; a leader the controller
	// does not list as live is reported as no leader by the controller.
	read := metaRead()
	read.Brokers[0].Topics[0].Partitions[0].ISR = []int32{4, 1}
	read.Controller.Brokers = []int32{1}
	read.Controller.Topics[1].Partitions[0].Leader = -1
	read.Controller.Topics[1].Partitions[0].ErrorCode = 5
	if r := BrokerMetadata(read); !r.Valid {
		t.Fatalf("ISR order and an offline leader: %s", r)
	}

	if r := BrokerMetadata(nil); !r.Valid || r.Inconclusive == "" {
		t.Errorf("no read: %s", r)
	}
}

// TestBrokerMetadataPlanted: each planted difference between a broker's
// cache and the controller's image is one violation naming the broker,
// the topic and the partition.
func TestBrokerMetadataPlanted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		plant     func(*BrokerMetadataRead)
		topic     string
		partition int32
		want      string
	}{
		{"ghost topic", func(r *BrokerMetadataRead) {
			r.Brokers[0].Topics = append(r.Brokers[0].Topics, MetaTopic{Name: "jt-0000", ID: "dd", Partitions: []MetaPartition{{Leader: 4, Replicas: []int32{4}, ISR: []int32{4}}}})
		}, "jt-0000", -1, `broker 4: ghost topic "jt-0000" (id dd, 1 partitions): the active controller 1002 does not have it`},
		{"stale leader", func(r *BrokerMetadataRead) {
			r.Brokers[1].Topics[0].Partitions[1].Leader = 1
		}, "jt-0001", 1, "broker 1: partition jt-0001-1 differs from the active controller's: stale leader 1, the controller's is 4"},
		{"stale epoch", func(r *BrokerMetadataRead) {
			r.Brokers[0].Topics[1].Partitions[0].LeaderEpoch = 6
		}, "jt-0002", 0, "broker 4: partition jt-0002-0 differs from the active controller's: stale leader epoch 6, the controller's is 7"},
		{"missing partition", func(r *BrokerMetadataRead) {
			r.Brokers[1].Topics[0].Partitions = r.Brokers[1].Topics[0].Partitions[:1]
		}, "jt-0001", 1, "broker 1: missing partition jt-0001-1: the active controller has it (leader 4, leader epoch 1)"},
		{"extra partition", func(r *BrokerMetadataRead) {
			r.Brokers[0].Topics[1].Partitions = append(r.Brokers[0].Topics[1].Partitions, MetaPartition{Partition: 1, Leader: 1, LeaderEpoch: 2})
		}, "jt-0002", 1, "broker 4: partition jt-0002-1 (leader 1, leader epoch 2) that the active controller's topic \"jt-0002\" does not have"},
		{"missing topic", func(r *BrokerMetadataRead) {
			r.Brokers[1].Topics = r.Brokers[1].Topics[:1]
		}, "jt-0002", -1, `broker 1: missing topic "jt-0002" (id bb, 1 partitions) that the active controller 1002 has`},
		{"stale incarnation", func(r *BrokerMetadataRead) {
			r.Brokers[0].Topics[0].ID = "a0"
		}, "jt-0001", -1, `broker 4: topic "jt-0001" has id a0, the active controller's has id aa`},
		{"stale ISR", func(r *BrokerMetadataRead) {
			r.Brokers[0].Topics[0].Partitions[0].ISR = []int32{1}
		}, "jt-0001", 0, "broker 4: partition jt-0001-0 differs from the active controller's: ISR [1], the controller's is [1 4]"},
		{"replicas", func(r *BrokerMetadataRead) {
			r.Brokers[1].Topics[0].Partitions[0].Replicas = []int32{4, 1}
		}, "jt-0001", 0, "broker 1: partition jt-0001-0 differs from the active controller's: replicas [4 1], the controller's are [1 4]"},
		{"live leader the controller does not name", func(r *BrokerMetadataRead) {
			r.Controller.Topics[1].Partitions[0].Leader = -1
			r.Brokers[1].Topics[1].Partitions[0].Leader = -1
		}, "jt-0002", 0, "broker 4: partition jt-0002-0 differs from the active controller's: stale leader 4, the controller's is -1"},
		{"unreadable broker", func(r *BrokerMetadataRead) {
			r.Brokers[0] = MetadataView{Node: 4, Addr: "127.0.0.1:9396", Error: "connection refused"}
		}, "", -1, "broker 4 (127.0.0.1:9396) did not answer Metadata after the final heal: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := metaRead()
			tc.plant(read)
			r := BrokerMetadata(read)
			if r.Valid || len(r.Violations) != 1 {
				t.Fatalf("want one violation:\n%s", r)
			}
			v := r.Violations[0]
			if v.Checker != "broker-metadata" || v.Topic != tc.topic || v.Partition != tc.partition || len(v.Brokers) != 1 ||
				!strings.Contains(v.Description, tc.want) {
				t.Errorf("violation %+v\nwant topic %q partition %d and %q", v, tc.topic, tc.partition, tc.want)
			}
			if !strings.Contains(r.String(), "differences remained") {
				t.Errorf("result does not say the differences remained:\n%s", r)
			}
		})
	}

	// Two brokers with the same ghost: one violation each.
	read := metaRead()
	ghost := MetaTopic{Name: "jt-0000", ID: "dd"}
	read.Brokers[0].Topics = append(read.Brokers[0].Topics, ghost)
	read.Brokers[1].Topics = append(read.Brokers[1].Topics, ghost)
	r := BrokerMetadata(read)
	var brokers []int32
	for _, v := range r.Violations {
		brokers = append(brokers, v.Brokers...)
	}
	if !slices.Equal(brokers, []int32{1, 4}) {
		t.Errorf("violations for brokers %v, want [1 4] in order:\n%s", brokers, r)
	}

	read = metaRead()
	read.Controller = MetadataView{Error: "no voter answered as the active controller"}
	if r := BrokerMetadata(read); r.Valid || !strings.Contains(r.String(), "the active controller's metadata could not be read") {
		t.Errorf("unreadable controller:\n%s", r)
	}
}
