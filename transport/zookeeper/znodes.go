package zookeeper

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Kafka's znode layout (ZooKeeper mode).
const (
	pathController       = "/controller"
	pathControllerEpoch  = "/controller_epoch"
	pathBrokers          = "/brokers"
	pathBrokerIDs        = "/brokers/ids"
	pathTopics           = "/brokers/topics"
	pathConfig           = "/config"
	pathConfigTopics     = "/config/topics"
	pathAdmin            = "/admin"
	pathDeleteTopics     = "/admin/delete_topics"
	pathReassignPartions = "/admin/reassign_partitions"
)

// basePaths are the persistent parents Kafka creates at startup.
var basePaths = []string{pathBrokers, pathBrokerIDs, pathTopics, pathConfig, pathConfigTopics, pathAdmin, pathDeleteTopics}

func brokerPath(id int32) string        { return pathBrokerIDs + "/" + strconv.Itoa(int(id)) }
func topicPath(name string) string      { return pathTopics + "/" + name }
func partitionsPath(name string) string { return topicPath(name) + "/partitions" }
func partitionPath(name string, p int32) string {
	return partitionsPath(name) + "/" + strconv.Itoa(int(p))
}
func statePath(name string, p int32) string { return partitionPath(name, p) + "/state" }
func configPath(name string) string         { return pathConfigTopics + "/" + name }
func deletePath(name string) string         { return pathDeleteTopics + "/" + name }

// Security protocol ids as Kafka numbers them.
var securityProtocols = map[string]int16{"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

func securityProtocolName(id int16) string {
	for n, v := range securityProtocols {
		if v == id {
			return n
		}
	}
	return "PLAINTEXT"
}

// EncodeKafkaUUID prints a topic id the way Kafka's Uuid.toString does:
// URL-safe base64 without padding, 22 characters.
func EncodeKafkaUUID(id rl.TopicID) string { return id.String() }

// DecodeKafkaUUID parses what EncodeKafkaUUID prints.
func DecodeKafkaUUID(s string) (rl.TopicID, error) {
	var id rl.TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("topic id %q: not a Kafka uuid (22 characters of URL-safe base64)", s)
	}
	copy(id[:], b)
	return id, nil
}

// brokerZNode is /brokers/ids/<id> (versions 1 to 5; we write 4).
type brokerZNode struct {
	Version     int               `json:"version"`
	Host        *string           `json:"host"`
	Port        int               `json:"port"`
	JMXPort     int               `json:"jmx_port"`
	Timestamp   string            `json:"timestamp"`
	Endpoints   []string          `json:"endpoints,omitempty"`
	ProtocolMap map[string]string `json:"listener_security_protocol_map,omitempty"`
	Rack        *string           `json:"rack"`
}

// parseBroker reads a broker znode into endpoints and rack.
func parseBroker(data []byte) (eps []rl.Endpoint, rack string, err error) {
	var z brokerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, "", fmt.Errorf("broker znode: %w", err)
	}
	if z.Rack != nil {
		rack = *z.Rack
	}
	for _, e := range z.Endpoints {
		name, hostport, ok := strings.Cut(e, "://")
		if !ok {
			return nil, "", fmt.Errorf("broker znode: endpoint %q: want LISTENER://host:port", e)
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, "", fmt.Errorf("broker znode: endpoint %q: %v", e, err)
		}
		pn, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, "", fmt.Errorf("broker znode: endpoint %q: port: %v", e, err)
		}
		proto := name
		if p, ok := z.ProtocolMap[name]; ok {
			proto = p
		}
		sp, ok := securityProtocols[proto]
		if !ok {
			return nil, "", fmt.Errorf("broker znode: endpoint %q: unknown security protocol %q", e, proto)
		}
		eps = append(eps, rl.Endpoint{Name: name, Host: host, Port: uint16(pn), SecurityProtocol: sp})
	}
	if len(eps) == 0 && z.Host != nil && z.Port > 0 {
		eps = append(eps, rl.Endpoint{Name: "PLAINTEXT", Host: *z.Host, Port: uint16(z.Port), SecurityProtocol: 0})
	}
	return eps, rack, nil
}

// encodeBroker writes a broker znode as Kafka 2.x writes version 4:
// host and port are those of the PLAINTEXT endpoint (null and -1 without
// one).
func encodeBroker(eps []rl.Endpoint, rack string, timestampMs int64) []byte {
	z := brokerZNode{Version: 4, Port: -1, JMXPort: -1, Timestamp: strconv.FormatInt(timestampMs, 10), ProtocolMap: map[string]string{}}
	for _, e := range eps {
		z.Endpoints = append(z.Endpoints, e.Name+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		z.ProtocolMap[e.Name] = securityProtocolName(e.SecurityProtocol)
		if z.Host == nil && e.SecurityProtocol == 0 {
			h := e.Host
			z.Host, z.Port = &h, int(e.Port)
		}
	}
	if rack != "" {
		z.Rack = &rack
	}
	b, _ := json.Marshal(z)
	return b
}

// brokerKey is what a broker znode is compared on: endpoints and rack,
// not the timestamp or JMX port.
func brokerKey(eps []rl.Endpoint, rack string) string {
	var sb strings.Builder
	for _, e := range eps {
		fmt.Fprintf(&sb, "%s=%s:%d/%d,", e.Name, e.Host, e.Port, e.SecurityProtocol)
	}
	sb.WriteString("|" + rack)
	return sb.String()
}

// topicZNode is /brokers/topics/<topic>.
type topicZNode struct {
	Version          int                `json:"version"`
	Partitions       map[string][]int32 `json:"partitions"`
	AddingReplicas   map[string][]int32 `json:"adding_replicas"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas"`
	TopicID          string             `json:"topic_id,omitempty"`
}

// topicAssignment is a topic znode's content.
type topicAssignment struct {
	ID       rl.TopicID // zero when the znode has none (Kafka before 2.8)
	Replicas [][]int32  // by partition; nil for a missing partition number
	Adding   map[int32][]int32
	Removing map[int32][]int32
}

func parseTopic(data []byte) (topicAssignment, error) {
	var z topicZNode
	var out topicAssignment
	if err := json.Unmarshal(data, &z); err != nil {
		return out, fmt.Errorf("topic znode: %w", err)
	}
	if z.TopicID != "" {
		id, err := DecodeKafkaUUID(z.TopicID)
		if err != nil {
			return out, fmt.Errorf("topic znode: %w", err)
		}
		out.ID = id
	}
	n := 0
	for k := range z.Partitions {
		p, err := strconv.Atoi(k)
		if err != nil || p < 0 {
			return out, fmt.Errorf("topic znode: partition %q", k)
		}
		n = max(n, p+1)
	}
	out.Replicas = make([][]int32, n)
	for k, r := range z.Partitions {
		p, _ := strconv.Atoi(k)
		out.Replicas[p] = r
	}
	parseMap := func(m map[string][]int32) (map[int32][]int32, error) {
		out := map[int32][]int32{}
		for k, v := range m {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 {
				return nil, fmt.Errorf("topic znode: partition %q", k)
			}
			if len(v) > 0 {
				out[int32(p)] = v
			}
		}
		return out, nil
	}
	var err error
	if out.Adding, err = parseMap(z.AddingReplicas); err != nil {
		return out, err
	}
	if out.Removing, err = parseMap(z.RemovingReplicas); err != nil {
		return out, err
	}
	return out, nil
}

// encodeTopic writes a topic znode as Kafka 2.8+ does (version 3 with
// topic_id).
func encodeTopic(a topicAssignment) []byte {
	z := topicZNode{Version: 3, Partitions: map[string][]int32{}, AddingReplicas: map[string][]int32{}, RemovingReplicas: map[string][]int32{}}
	if !a.ID.IsZero() {
		z.TopicID = EncodeKafkaUUID(a.ID)
	} else {
		z.Version = 2
	}
	for p, r := range a.Replicas {
		if r != nil {
			z.Partitions[strconv.Itoa(p)] = r
		}
	}
	for p, r := range a.Adding {
		if len(r) > 0 {
			z.AddingReplicas[strconv.Itoa(int(p))] = r
		}
	}
	for p, r := range a.Removing {
		if len(r) > 0 {
			z.RemovingReplicas[strconv.Itoa(int(p))] = r
		}
	}
	b, _ := json.Marshal(z) // maps marshal with sorted keys: deterministic
	return b
}

// topicKey compares topic znodes on content: encodeTopic is canonical.
func topicKey(a topicAssignment) string { return string(encodeTopic(a)) }

// partitionStateZNode is /brokers/topics/<t>/partitions/<p>/state.
type partitionStateZNode struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	// LeaderRecoveryState is written by Kafka 3.2+ (version 2); read only.
	LeaderRecoveryState *int8 `json:"leader_recovery_state,omitempty"`
}

type partitionState struct {
	Leader, LeaderEpoch, ControllerEpoch int32
	ISR                                  []int32
}

func parsePartitionState(data []byte) (partitionState, error) {
	var z partitionStateZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return partitionState{}, fmt.Errorf("partition state znode: %w", err)
	}
	return partitionState{Leader: z.Leader, LeaderEpoch: z.LeaderEpoch, ControllerEpoch: z.ControllerEpoch, ISR: z.ISR}, nil
}

func encodePartitionState(s partitionState) []byte {
	isr := s.ISR
	if isr == nil {
		isr = []int32{}
	}
	b, _ := json.Marshal(partitionStateZNode{ControllerEpoch: s.ControllerEpoch, Leader: s.Leader, Version: 1, LeaderEpoch: s.LeaderEpoch, ISR: isr})
	return b
}

// stateKey compares state znodes on leader, leader epoch and ISR. The
// controller_epoch field names the controller that last wrote the znode
// (as in Kafka): a new controller does not rewrite what it did not change.
func stateKey(s partitionState) string {
	return fmt.Sprintf("%d/%d/%v", s.Leader, s.LeaderEpoch, s.ISR)
}

// configZNode is /config/topics/<topic>.
type configZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func parseConfig(data []byte) (map[string]string, error) {
	var z configZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("config znode: %w", err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

func encodeConfig(cfg []rl.ConfigEntry) []byte {
	m := make(map[string]string, len(cfg))
	for _, e := range cfg {
		m[e.Key] = e.Value
	}
	b, _ := json.Marshal(configZNode{Version: 1, Config: m})
	return b
}

func configKeyOf(m map[string]string) string {
	b, _ := json.Marshal(configZNode{Version: 1, Config: m})
	return string(b)
}

// controllerZNode is /controller.
type controllerZNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

func encodeController(id int32, timestampMs int64) []byte {
	b, _ := json.Marshal(controllerZNode{Version: 1, BrokerID: id, Timestamp: strconv.FormatInt(timestampMs, 10)})
	return b
}

func parseController(data []byte) (int32, error) {
	var z controllerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return -1, fmt.Errorf("controller znode: %w", err)
	}
	return z.BrokerID, nil
}

// reassignZNode is /admin/reassign_partitions.
type reassignZNode struct {
	Version    int                 `json:"version"`
	Partitions []reassignPartition `json:"partitions"`
}

type reassignPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

func parseReassign(data []byte) ([]reassignPartition, error) {
	var z reassignZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("reassign_partitions znode: %w", err)
	}
	return z.Partitions, nil
}

func encodeReassign(parts []reassignPartition) []byte {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	b, _ := json.Marshal(reassignZNode{Version: 1, Partitions: parts})
	return b
}

func parseEpoch(data []byte) (int32, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("controller_epoch znode %q: %w", data, err)
	}
	return int32(v), nil
}
