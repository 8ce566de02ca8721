package server

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Setting is one setting of a node as `ctrlnode run` reads it. Its key is
// written as-is in a config file (`key = value` lines, Kafka's
// server.properties style, `#` comments), as a flag with dots turned into
// dashes (`--node-id`, FlagName), and as an environment variable with
// CTRLNODE_, upper case, dots turned into underscores (`CTRLNODE_NODE_ID`,
// EnvName). Precedence: flag, then environment, then file, then the
// default (ResolveSettings). BuildNodeConfig turns the values into a
// NodeConfig.
type Setting struct {
	Key     string
	Default string
	// Doc says what the setting does: the flag's usage.
	Doc string
	// Field is the field of NodeConfig the setting fills, a Config field
	// as a FieldError names it ("SessionTimeout",
	// "ListenerLimits.MaxFrameBytes"), so that an error on the field names
	// the setting; empty for a setting that fills none of its own (a
	// key or password file).
	Field string
	// stage is when BuildNodeConfig reads the setting on its own; 0 for
	// a setting it reads together with others (the TLS files, the
	// voters, the SASL logins).
	stage stage
	// parse reads the value into nc; nil to set Field from the value as
	// its type takes it (setField).
	parse func(nc *NodeConfig, v string) error
}

// stage orders the reading of the settings read on their own: a setting
// is read after those it depends on (a node id after the roles), and of
// several bad settings the first one read is refused.
type stage int

const (
	together      stage = iota // read with other settings, not on its own
	stageRoles                 // roles
	stageIDs                   // node.id, broker.id: required or not by the roles
	stageLimits                // the node's timeouts and its listeners' limits
	stageValues                // the rest of what the node is
	stageSecurity              // the listener's SASL mechanisms, super users, authorizer
)

var settings = slices.Concat(coreSettings, LimitSettings(), tlsGroupSettings(), dataSettings(), StaticConfigSettings())

var coreSettings = []Setting{
	{"node.id", "", "this node's id: the voter id with the voter role (voters 1001-1003, brokers from 1 by convention)", "NodeID", stageIDs, readNodeID},
	{"roles", "voter", "comma-separated roles: voter, broker, or both", "Roles", stageRoles, readRoles},
	{"data.dir", "", "folder for the voter's raft log, snapshots and state (required for a voter)", "DataDir", stageValues, nil},
	{"raft.listener", "", "host:port the voter's raft transport binds (required for a voter)", "RaftAddr", stageValues, nil},
	{"raft.advertised.listener", "", "host:port the other voters dial for raft (default: raft.listener)", "RaftAdvertise", stageValues, nil},
	{"raft.snapshot.threshold", "8192", "log entries since the last snapshot after which the voter takes a new one (raft's SnapshotThreshold)", "RaftSnapshotThreshold", stageValues, nil},
	{"raft.snapshot.interval", "120s", "how often the voter checks raft.snapshot.threshold, with up to as much again of jitter (raft's SnapshotInterval)", "RaftSnapshotInterval", stageValues, nil},
	{"raft.trailing.logs", "10240", "log entries kept behind a snapshot, so that a voter that lags by fewer catches up from the log instead of being sent the snapshot (raft's TrailingLogs)", "RaftTrailingLogs", stageValues, nil},
	{"raft.log.store", string(raftlog.DefaultLogStore), "where the voter keeps its raft log: segments (append-only segment files, one fdatasync per append), wal (hashicorp/raft-wal) or bolt (raft-boltdb, two fdatasyncs per append); a data.dir holding its log in another one has it moved on start", "RaftLogStore", stageValues, nil},
	{"state.change.log.enable", "true", "keep the voter's state-change log: every replica, partition, topic and broker transition it applies, one JSON line each, in <data.dir>/state-change-log (what `ctrlnode state-changes` reads)", "StateChangeLog", stageValues, nil},
	{"state.change.log.max.bytes", "67108864", "size at which the state-change log's file is rotated", "StateChangeLogMaxBytes", stageValues, nil},
	{"state.change.log.files", "4", "state-change log files kept, the one being written included", "StateChangeLogFiles", stageValues, nil},
	{"listener", "", "host:port of the voter's Kafka-protocol listener for admin clients and brokers (required for a voter)", "Listener", stageValues, nil},
	{"advertised.listener", "", "host:port clients are told for this voter's listener (default: listener)", "ListenerAdvertise", stageValues, nil},
	{"voters", "", "every voter as id@raft-host:port, comma-separated, this node included (the quorum itself starts from the initial voters written by ctrlnode format)", "Voters", together, nil},
	{"voter.listeners", "", "every voter's Kafka listener as id@host:port, comma-separated", "VoterListeners", together, nil},
	{"session.timeout", "9s", "broker session timeout: a broker silent this long is fenced", "SessionTimeout", stageLimits, nil},
	{"cluster.id", "", "the cluster id, when given: a voter refuses a data.dir formatted for another; a broker registers with it (default: the voter's data.dir's, from ctrlnode format)", "ClusterID", stageValues, nil},
	{"broker.id", "", "the broker's id with the broker role (must not be a voter id)", "BrokerID", stageIDs, readBrokerID},
	{"broker.listener", "", "host:port the broker agent binds (required for a broker)", "BrokerListener", stageValues, nil},
	{"broker.advertised.listener", "", "host:port the broker registers (default: broker.listener)", "BrokerAdvertise", stageValues, nil},
	{"broker.rack", "", "the broker's rack", "BrokerRack", stageValues, nil},
	{"broker.controllers", "", "controller listeners the broker bootstraps from, comma-separated host:port (default: the voters' listeners)", "Controllers", stageValues, readControllers},
	{"broker.heartbeat.interval", "2s", "time between the broker's heartbeats", "HeartbeatInterval", stageLimits, nil},
	{"http.listener", "", "host:port of the HTTP endpoint: /metrics, /healthz, /readyz, /state-hash, /brokers (empty: none)", "HTTPAddr", stageValues, nil},
	{"pprof", "false", "serve Go's profiler under /debug/pprof/ on the HTTP endpoint", "Pprof", stageValues, nil},
	{"zookeeper.mirror", "", "mirror the committed image to Kafka's znodes in this ZooKeeper (host:port[,…][/chroot]) while this voter is active (empty: none)", "ZooKeeperMirror", stageValues, nil},
	{"log.level", "info", "log level: trace, debug, info, warn, error", "LogLevel", stageValues, readLogLevel},
	{"shutdown.timeout", "30s", "how long a SIGTERM waits for the controlled shutdown and the leadership handover", "ShutdownTimeout", stageLimits, nil},
	{"tls.cert.file", "", "PEM certificate of this node (naming voter node.id and/or broker broker.id; see `ctrlnode certs`): with tls.key.file and tls.ca.file, raft, the listener, the broker agent and every connection between nodes run over mutual TLS, each listener with these files unless it has its own (raft.tls.*, listener.tls.*, broker.listener.tls.*); SIGHUP reloads the three files (empty: plain TCP)", "TLS", together, nil},
	{"tls.key.file", "", "PEM private key of tls.cert.file", "", together, nil},
	{"tls.ca.file", "", "PEM bundle of the CA certificates peers' and clients' certificates must chain to", "", together, nil},
	{"sasl.enabled.mechanisms", "", "SASL mechanisms the Kafka listeners (a voter's, a broker's) require clients to log in with, comma-separated: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (PLAIN only over TLS); clients with a TLS certificate need none (empty: no SASL)", "Security.SASLMechanisms", stageSecurity, readMechanisms},
	{"super.users", "", "principals allowed everything, separated by ; or , (User:admin;User:ops)", "Security.SuperUsers", stageSecurity, readSuperUsers},
	{"authorizer.enforce", "false", "enforce the ACL rules even with no SASL and no rule in the log (then only super users and voters may do anything); otherwise rules are enforced once SASL is on or the first rule exists", "Security.Authorize", stageSecurity, nil},
	{"sasl.bootstrap.user", "", "SCRAM-SHA-512 user created when the log holds no SCRAM credential (a new cluster), so that someone can log in; also this node's own login unless sasl.user is set", "Security.BootstrapUsers", together, nil},
	{"sasl.bootstrap.password.file", "", "file whose first line is sasl.bootstrap.user's password", "", together, nil},
	{"sasl.user", "", "this node's own SASL login towards the voters' listeners (the broker agent's and the voters' calls to each other); must be a super user (default: sasl.bootstrap.user)", "SASL", together, nil},
	{"sasl.password.file", "", "file whose first line is sasl.user's password", "", together, nil},
	{"sasl.mechanism", "SCRAM-SHA-512", "mechanism of this node's own login", "", together, nil},
}

// Settings are every setting of a node.
func Settings() []Setting { return slices.Clone(settings) }

func settingByKey(k string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == k {
			return s, true
		}
	}
	return Setting{}, false
}

// FlagName is the flag of the setting key, without dashes: node-id.
func FlagName(key string) string { return strings.ReplaceAll(key, ".", "-") }

// EnvName is the environment variable of the setting key:
// CTRLNODE_NODE_ID.
func EnvName(key string) string {
	return "CTRLNODE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// SettingValue is a setting's value and where it came from: "default",
// "<file> line <n>", "env <NAME>" or "flag --<name>".
type SettingValue struct {
	Value  string
	Source string
}

// SettingValues are settings' values by key.
type SettingValues map[string]SettingValue

// Get is the value of key.
func (vs SettingValues) Get(key string) string { return vs[key].Value }

// Describe names a setting and where its value came from, for messages.
func (vs SettingValues) Describe(key string) string {
	v := vs[key]
	if v.Source == "" || v.Source == "default" {
		return key
	}
	return fmt.Sprintf("%s (from %s)", key, v.Source)
}

// settingError is a refused configuration; the message names the
// setting.
type settingError struct{ msg string }

func (e *settingError) Error() string { return e.msg }

func cfgErr(format string, args ...any) error { return &settingError{fmt.Sprintf(format, args...)} }

// ParseSettingsFile reads a config file of `key = value` lines.
func ParseSettingsFile(path string) (SettingValues, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, cfgErr("config file: %v", err)
	}
	defer f.Close()
	return ParseSettings(f, path)
}

// ParseSettings reads `key = value` lines from r, naming it name in
// messages and sources; an unknown key or one set twice is refused.
func ParseSettings(r io.Reader, name string) (SettingValues, error) {
	out := SettingValues{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, "!") {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			return nil, cfgErr("%s line %d: %q is not key = value", name, line, text)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, known := settingByKey(k); !known {
			return nil, cfgErr("%s line %d: unknown setting %q%s", name, line, k, suggest(k))
		}
		if prev, dup := out[k]; dup {
			return nil, cfgErr("%s line %d: %s is set twice (first at %s)", name, line, k, prev.Source)
		}
		out[k] = SettingValue{Value: v, Source: fmt.Sprintf("%s line %d", name, line)}
	}
	if err := sc.Err(); err != nil {
		return nil, cfgErr("config file %s: %v", name, err)
	}
	return out, nil
}

// suggest returns a hint naming the closest known key, if one is close.
func suggest(k string) string {
	best, bestD := "", 4
	for _, s := range settings {
		if d := editDistance(k, s.Key); d < bestD {
			best, bestD = s.Key, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ResolveSettings merges the defaults, a config file's values, the
// environment's CTRLNODE_ variables (an unknown one is refused) and the
// flags that were set, by key: a flag wins over the environment, which
// wins over the file.
func ResolveSettings(file SettingValues, environ []string, flags map[string]string) (SettingValues, error) {
	vs := SettingValues{}
	for _, s := range settings {
		vs[s.Key] = SettingValue{Value: s.Default, Source: "default"}
	}
	for k, v := range file {
		vs[k] = v
	}
	envKeys := map[string]string{}
	for _, s := range settings {
		envKeys[EnvName(s.Key)] = s.Key
	}
	var unknown []string
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CTRLNODE_") {
			continue
		}
		k, ok := envKeys[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		vs[k] = SettingValue{Value: v, Source: "env " + name}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, cfgErr("environment: unknown setting %s (settings are CTRLNODE_ plus the key in upper case, e.g. CTRLNODE_NODE_ID)", strings.Join(unknown, ", "))
	}
	for k, v := range flags {
		vs[k] = SettingValue{Value: v, Source: "flag --" + FlagName(k)}
	}
	return vs, nil
}
