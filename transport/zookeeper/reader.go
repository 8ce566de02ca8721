package zookeeper

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Cluster is a ZooKeeper-mode Kafka cluster's metadata as ZooKeeper holds
// it.
type Cluster struct {
	// ControllerEpoch is /controller_epoch (0 when missing).
	ControllerEpoch int32
	// ControllerID is the broker /controller names (-1 when missing).
	ControllerID int32
	// Brokers are the registered (live) brokers, by id.
	Brokers []Broker
	// Topics by name.
	Topics []Topic
	// Reassignments is /admin/reassign_partitions: target replicas of
	// partitions whose reassignment was requested the pre-2.4 way.
	Reassignments []reassignPartition
}

// Broker is /brokers/ids/<id>.
type Broker struct {
	ID        int32
	Endpoints []rl.Endpoint
	Rack      string
	// Czxid is the transaction that created the (ephemeral) znode: it
	// changes each time the broker registers, so it names an incarnation.
	Czxid int64
}

// Incarnation is the incarnation id a ZooKeeper-registered broker is
// imported with: derived from its id and its registration's czxid, so the
// same registration always imports as the same incarnation.
func (b Broker) Incarnation() rl.IncarnationID {
	var in [12]byte
	binary.BigEndian.PutUint32(in[:4], uint32(b.ID))
	binary.BigEndian.PutUint64(in[4:], uint64(b.Czxid))
	h := sha256.Sum256(append([]byte("zookeeper broker registration\x00"), in[:]...))
	var id rl.IncarnationID
	copy(id[:], h[:16])
	return id
}

// Topic is /brokers/topics/<topic> with its partitions' states, its
// configs and its pending deletion.
type Topic struct {
	Name string
	// ID is the znode's topic_id, or one derived from the name and the
	// znode's czxid when it has none (Kafka before 2.8), so a second
	// import finds the same id.
	ID       rl.TopicID
	IDFromZK bool
	Czxid    int64
	Configs  map[string]string
	Deleting bool
	// Partitions by number.
	Partitions []Partition
}

// Partition is one partition's assignment and state znode.
type Partition struct {
	// Replicas is the assignment; during a reassignment, the union of the
	// original and target replicas (as Kafka keeps it).
	Replicas []int32
	Adding   []int32
	Removing []int32
	// HasState is false for a partition whose state znode does not exist
	// yet (the old controller had not elected it).
	HasState bool
	State    partitionState
	// StateVersion is the state znode's version (Kafka's zkVersion, the
	// partition epoch of KRaft).
	StateVersion int32
	// LegacyReassign is set when /admin/reassign_partitions names the
	// partition and the topic znode shows no reassignment yet: the target.
	LegacyReassign []int32
}

func derivedTopicID(name string, czxid int64) rl.TopicID {
	var z [8]byte
	binary.BigEndian.PutUint64(z[:], uint64(czxid))
	h := sha256.Sum256(append([]byte("zookeeper topic\x00"+name+"\x00"), z[:]...))
	var id rl.TopicID
	copy(id[:], h[:16])
	// Kafka reserves the zero uuid and 0...01; and its own ids never
	// start with '-' in base64.
	if id[0]>>2 == 62 {
		id[0] ^= 0x80
	}
	return id
}

// readParallel is how many reads the importer keeps in flight.
const readParallel = 64

// ReadCluster reads a ZooKeeper-mode Kafka cluster's metadata.
func readCluster(c *client) (*Cluster, error) {
	cl := &Cluster{ControllerID: -1}
	if data, _, ok, err := c.get(pathControllerEpoch); err != nil {
		return nil, err
	} else if ok {
		if cl.ControllerEpoch, err = parseEpoch(data); err != nil {
			return nil, err
		}
	}
	if data, _, ok, err := c.get(pathController); err != nil {
		return nil, err
	} else if ok {
		if id, err := parseController(data); err == nil {
			cl.ControllerID = id
		}
	}

	ids, err := c.children(pathBrokerIDs)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(ids))
	for i, s := range ids {
		paths[i] = pathBrokerIDs + "/" + s
	}
	for i, r := range c.getMany(paths, readParallel) {
		if r.err != nil {
			return nil, r.err
		}
		if !r.ok {
			continue // the broker went away while we read
		}
		id, err := strconv.ParseInt(ids[i], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%s: not a broker id", paths[i])
		}
		eps, rack, err := parseBroker(r.data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", paths[i], err)
		}
		cl.Brokers = append(cl.Brokers, Broker{ID: int32(id), Endpoints: eps, Rack: rack, Czxid: r.stat.Czxid})
	}
	sort.Slice(cl.Brokers, func(i, j int) bool { return cl.Brokers[i].ID < cl.Brokers[j].ID })

	if data, _, ok, err := c.get(pathReassignPartions); err != nil {
		return nil, err
	} else if ok && len(data) > 0 {
		if cl.Reassignments, err = parseReassign(data); err != nil {
			return nil, err
		}
	}
	deleting, err := c.children(pathDeleteTopics)
	if err != nil {
		return nil, err
	}
	isDeleting := map[string]bool{}
	for _, n := range deleting {
		isDeleting[n] = true
	}

	names, err := c.children(pathTopics)
	if err != nil {
		return nil, err
	}
	paths = paths[:0]
	for _, n := range names {
		paths = append(paths, topicPath(n), configPath(n))
	}
	res := c.getMany(paths, readParallel)
	type pref struct{ topic, part int }
	var statePaths []string
	var stateRefs []pref
	for i, name := range names {
		tr, cr := res[2*i], res[2*i+1]
		if tr.err != nil {
			return nil, tr.err
		}
		if cr.err != nil {
			return nil, cr.err
		}
		if !tr.ok {
			continue
		}
		a, err := parseTopic(tr.data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", topicPath(name), err)
		}
		t := Topic{Name: name, ID: a.ID, IDFromZK: !a.ID.IsZero(), Czxid: tr.stat.Czxid, Deleting: isDeleting[name], Configs: map[string]string{}}
		if !t.IDFromZK {
			t.ID = derivedTopicID(name, t.Czxid)
		}
		if cr.ok && len(cr.data) > 0 {
			if t.Configs, err = parseConfig(cr.data); err != nil {
				return nil, fmt.Errorf("%s: %w", configPath(name), err)
			}
		}
		for p, r := range a.Replicas {
			if r == nil {
				return nil, fmt.Errorf("%s: partition %d missing (partitions must be numbered from 0)", topicPath(name), p)
			}
			t.Partitions = append(t.Partitions, Partition{Replicas: r, Adding: a.Adding[int32(p)], Removing: a.Removing[int32(p)]})
			statePaths = append(statePaths, statePath(name, int32(p)))
			stateRefs = append(stateRefs, pref{len(cl.Topics), p})
		}
		cl.Topics = append(cl.Topics, t)
	}
	for i, r := range c.getMany(statePaths, readParallel) {
		if r.err != nil {
			return nil, r.err
		}
		if !r.ok {
			continue
		}
		s, err := parsePartitionState(r.data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", statePaths[i], err)
		}
		p := &cl.Topics[stateRefs[i].topic].Partitions[stateRefs[i].part]
		p.HasState, p.State, p.StateVersion = true, s, r.stat.Version
	}
	byName := map[string]int{}
	for i, t := range cl.Topics {
		byName[t.Name] = i
	}
	for _, ra := range cl.Reassignments {
		i, ok := byName[ra.Topic]
		if !ok || ra.Partition < 0 || int(ra.Partition) >= len(cl.Topics[i].Partitions) {
			continue // Kafka ignores a request for a partition that does not exist
		}
		p := &cl.Topics[i].Partitions[ra.Partition]
		if len(p.Adding) == 0 && len(p.Removing) == 0 && !slices.Equal(p.Replicas, ra.Replicas) {
			p.LegacyReassign = ra.Replicas
		}
	}
	return cl, nil
}

func sortStrings(s []string) { sort.Strings(s) }

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
