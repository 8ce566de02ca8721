package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// A node's configuration is a set of settings, each with one key. A key
// is written as-is in a config file (`key = value` lines, Kafka's
// server.properties style, `#` comments), as a flag with dots turned into
// dashes (`--node-id`), and as an environment variable with CTRLNODE_,
// upper case, dots turned into underscores (`CTRLNODE_NODE_ID`).
// Precedence: flag, then environment, then file, then the default.
type setting struct {
	key   string
	def   string
	usage string
	// field is the server.Config field the setting fills, for naming the
	// setting in validation errors.
	field string
}

var settings = slices.Concat(coreSettings, limitSettings(), tlsGroupSettings())

var coreSettings = []setting{
	{"node.id", "", "this node's id: the voter id with the voter role (voters 1001-1003, brokers from 1 by convention)", "NodeID"},
	{"roles", "voter", "comma-separated roles: voter, broker, or both", "Roles"},
	{"data.dir", "", "folder for the voter's raft log, snapshots and state (required for a voter)", "DataDir"},
	{"raft.listener", "", "host:port the voter's raft transport binds (required for a voter)", "RaftAddr"},
	{"raft.advertised.listener", "", "host:port the other voters dial for raft (default: raft.listener)", "RaftAdvertise"},
	{"raft.snapshot.threshold", "8192", "log entries since the last snapshot after which the voter takes a new one (raft's SnapshotThreshold)", "RaftSnapshotThreshold"},
	{"raft.snapshot.interval", "120s", "how often the voter checks raft.snapshot.threshold, with up to as much again of jitter (raft's SnapshotInterval)", "RaftSnapshotInterval"},
	{"raft.trailing.logs", "10240", "log entries kept behind a snapshot, so that a voter that lags by fewer catches up from the log instead of being sent the snapshot (raft's TrailingLogs)", "RaftTrailingLogs"},
	{"listener", "", "host:port of the voter's Kafka-protocol listener for admin clients and brokers (required for a voter)", "Listener"},
	{"advertised.listener", "", "host:port clients are told for this voter's listener (default: listener)", "ListenerAdvertise"},
	{"voters", "", "every voter as id@raft-host:port, comma-separated, this node included; the first start bootstraps the quorum from it", "Voters"},
	{"voter.listeners", "", "every voter's Kafka listener as id@host:port, comma-separated", "VoterListeners"},
	{"session.timeout", "9s", "broker session timeout: a broker silent this long is fenced", "SessionTimeout"},
	{"cluster.id", "", "cluster id reported to clients; brokers registering with another one are refused", "ClusterID"},
	{"broker.id", "", "the broker's id with the broker role (must not be a voter id)", "BrokerID"},
	{"broker.listener", "", "host:port the broker agent binds (required for a broker)", "BrokerListener"},
	{"broker.advertised.listener", "", "host:port the broker registers (default: broker.listener)", "BrokerAdvertise"},
	{"broker.rack", "", "the broker's rack", "BrokerRack"},
	{"broker.controllers", "", "controller listeners the broker bootstraps from, comma-separated host:port (default: the voters' listeners)", "Controllers"},
	{"broker.heartbeat.interval", "2s", "time between the broker's heartbeats", "HeartbeatInterval"},
	{"http.listener", "", "host:port of the HTTP endpoint: /metrics, /healthz, /readyz, /state-hash, /brokers (empty: none)", "HTTPAddr"},
	{"pprof", "false", "serve Go's profiler under /debug/pprof/ on the HTTP endpoint", "Pprof"},
	{"zookeeper.mirror", "", "mirror the committed image to Kafka's znodes in this ZooKeeper (host:port[,…][/chroot]) while this voter is active (empty: none)", "ZooKeeperMirror"},
	{"log.level", "info", "log level: trace, debug, info, warn, error", ""},
	{"shutdown.timeout", "30s", "how long a SIGTERM waits for the controlled shutdown and the leadership handover", ""},
	{"tls.cert.file", "", "PEM certificate of this node (naming voter node.id and/or broker broker.id; see `ctrlnode certs`): with tls.key.file and tls.ca.file, raft, the listener, the broker agent and every connection between nodes run over mutual TLS, each listener with these files unless it has its own (raft.tls.*, listener.tls.*, broker.listener.tls.*); SIGHUP reloads the three files (empty: plain TCP)", "TLS"},
	{"tls.key.file", "", "PEM private key of tls.cert.file", ""},
	{"tls.ca.file", "", "PEM bundle of the CA certificates peers' and clients' certificates must chain to", ""},
	{"sasl.enabled.mechanisms", "", "SASL mechanisms the listener requires clients to log in with, comma-separated: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (PLAIN only over TLS); clients with a TLS certificate need none (empty: no SASL)", "SASLMechanisms"},
	{"super.users", "", "principals allowed everything, separated by ; or , (User:admin;User:ops)", "SuperUsers"},
	{"authorizer.enforce", "false", "enforce the ACL rules even with no SASL and no rule in the log (then only super users and voters may do anything); otherwise rules are enforced once SASL is on or the first rule exists", "Authorize"},
	{"sasl.bootstrap.user", "", "SCRAM-SHA-512 user created when the log holds no SCRAM credential (a new cluster), so that someone can log in; also this node's own login unless sasl.user is set", "BootstrapUsers"},
	{"sasl.bootstrap.password.file", "", "file whose first line is sasl.bootstrap.user's password", ""},
	{"sasl.user", "", "this node's own SASL login towards the voters' listeners (the broker agent's and the voters' calls to each other); must be a super user (default: sasl.bootstrap.user)", "SASL"},
	{"sasl.password.file", "", "file whose first line is sasl.user's password", ""},
	{"sasl.mechanism", "SCRAM-SHA-512", "mechanism of this node's own login", ""},
}

func settingByKey(k string) (setting, bool) {
	for _, s := range settings {
		if s.key == k {
			return s, true
		}
	}
	return setting{}, false
}

func flagName(key string) string { return strings.ReplaceAll(key, ".", "-") }

func envName(key string) string {
	return "CTRLNODE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// value is a setting's value and where it came from.
type value struct {
	v      string
	source string // "default", "file x line n", "env NAME", "flag --name"
}

// nodeSettings are the resolved settings of a node.
type nodeSettings map[string]value

func (ns nodeSettings) get(key string) string { return ns[key].v }

// describe names a setting and where its value came from, for messages.
func (ns nodeSettings) describe(key string) string {
	v := ns[key]
	if v.source == "" || v.source == "default" {
		return key
	}
	return fmt.Sprintf("%s (from %s)", key, v.source)
}

// configError is a refused configuration; the message names the setting.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func cfgErr(format string, args ...any) error { return &configError{fmt.Sprintf(format, args...)} }

// parseConfigFile reads `key = value` lines.
func parseConfigFile(path string) (map[string]value, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, cfgErr("config file: %v", err)
	}
	defer f.Close()
	return parseConfig(f, path)
}

func parseConfig(r io.Reader, name string) (map[string]value, error) {
	out := map[string]value{}
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
			return nil, cfgErr("%s line %d: %s is set twice (first at %s)", name, line, k, prev.source)
		}
		out[k] = value{v: v, source: fmt.Sprintf("%s line %d", name, line)}
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
		if d := editDistance(k, s.key); d < bestD {
			best, bestD = s.key, d
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

// resolveSettings merges defaults, the file, the environment and the
// flags that were set.
func resolveSettings(fileVals map[string]value, environ []string, flags map[string]string) (nodeSettings, error) {
	ns := nodeSettings{}
	for _, s := range settings {
		ns[s.key] = value{v: s.def, source: "default"}
	}
	for k, v := range fileVals {
		ns[k] = v
	}
	envKeys := map[string]string{}
	for _, s := range settings {
		envKeys[envName(s.key)] = s.key
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
		ns[k] = value{v: v, source: "env " + name}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, cfgErr("environment: unknown setting %s (settings are CTRLNODE_ plus the key in upper case, e.g. CTRLNODE_NODE_ID)", strings.Join(unknown, ", "))
	}
	for k, v := range flags {
		ns[k] = value{v: v, source: "flag --" + flagName(k)}
	}
	return ns, nil
}

// runFlags defines one flag per setting plus --config on fs, and returns
// a function giving the flags that were set, by key.
func runFlags(fs *flag.FlagSet) (configPath *string, setFlags func() map[string]string) {
	configPath = fs.String("config", "", "config file of `key = value` lines (see the settings below)")
	vals := map[string]*string{}
	for _, s := range settings {
		vals[s.key] = fs.String(flagName(s.key), s.def, s.usage)
	}
	return configPath, func() map[string]string {
		out := map[string]string{}
		fs.Visit(func(f *flag.Flag) {
			for _, s := range settings {
				if flagName(s.key) == f.Name {
					out[s.key] = *vals[s.key]
				}
			}
		})
		return out
	}
}

// nodeConfig turns settings into a server.Config, refusing bad values
// with a message that names the setting and where it was set.
type nodeConfig struct {
	server.Config
	LogLevel        string
	ShutdownTimeout time.Duration
	// TLSFiles are the tls.*.file settings, all empty without TLS.
	TLSFiles tlsconfig.Files
	// OwnTLSFiles are the files of the listeners that have their own, by
	// the prefix of their settings ("raft.tls.").
	OwnTLSFiles map[string]tlsconfig.Files
}

func buildNodeConfig(ns nodeSettings) (nodeConfig, error) {
	var nc nodeConfig
	c := &nc.Config
	bad := func(key, format string, args ...any) error {
		return cfgErr("%s: %s", ns.describe(key), fmt.Sprintf(format, args...))
	}
	if err := tlsFileSettings(ns, &nc); err != nil {
		return nc, err
	}
	for _, role := range strings.Split(ns.get("roles"), ",") {
		switch strings.TrimSpace(role) {
		case "voter", "controller":
			c.Voter = true
		case "broker":
			c.Broker = true
		case "":
		default:
			return nc, bad("roles", "unknown role %q: want voter, broker or voter,broker", strings.TrimSpace(role))
		}
	}
	if !c.Voter && !c.Broker {
		return nc, bad("roles", "empty: want voter, broker or voter,broker")
	}
	parseID := func(key string, required bool) (int32, error) {
		s := ns.get(key)
		if s == "" {
			if required {
				return 0, bad(key, "required")
			}
			return -1, nil
		}
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil || v < 0 {
			return 0, bad(key, "%q is not a non-negative integer", s)
		}
		return int32(v), nil
	}
	var err error
	if c.NodeID, err = parseID("node.id", c.Voter); err != nil {
		return nc, err
	}
	if c.BrokerID, err = parseID("broker.id", false); err != nil {
		return nc, err
	}
	if c.Broker && c.BrokerID < 0 {
		if c.Voter {
			return nc, bad("broker.id", "required when a node has both roles (voter and broker ids must differ)")
		}
		if c.NodeID < 0 {
			return nc, bad("node.id", "required (or set broker.id)")
		}
		c.BrokerID = c.NodeID
	}
	if !c.Voter && c.NodeID < 0 {
		c.NodeID = c.BrokerID
	}
	dur := ns.duration
	if c.SessionTimeout, err = dur("session.timeout"); err != nil {
		return nc, err
	}
	if c.HeartbeatInterval, err = dur("broker.heartbeat.interval"); err != nil {
		return nc, err
	}
	if nc.ShutdownTimeout, err = dur("shutdown.timeout"); err != nil {
		return nc, err
	}
	if err := limitsSettings(ns, c); err != nil {
		return nc, err
	}
	if err := parseLimit(ns, "raft.snapshot.threshold", &c.RaftSnapshotThreshold); err != nil {
		return nc, err
	}
	if err := parseLimit(ns, "raft.snapshot.interval", &c.RaftSnapshotInterval); err != nil {
		return nc, err
	}
	if err := parseLimit(ns, "raft.trailing.logs", &c.RaftTrailingLogs); err != nil {
		return nc, err
	}
	switch ns.get("pprof") {
	case "true", "1", "yes":
		c.Pprof = true
	case "false", "0", "no", "":
	default:
		return nc, bad("pprof", "%q is not true or false", ns.get("pprof"))
	}
	c.ZooKeeperMirror = ns.get("zookeeper.mirror")
	nc.LogLevel = ns.get("log.level")
	switch nc.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		return nc, bad("log.level", "%q is not one of trace, debug, info, warn, error", nc.LogLevel)
	}
	c.DataDir = ns.get("data.dir")
	c.RaftAddr = ns.get("raft.listener")
	c.RaftAdvertise = ns.get("raft.advertised.listener")
	c.Listener = ns.get("listener")
	c.ListenerAdvertise = ns.get("advertised.listener")
	c.ClusterID = ns.get("cluster.id")
	c.BrokerListener = ns.get("broker.listener")
	c.BrokerAdvertise = ns.get("broker.advertised.listener")
	c.BrokerRack = ns.get("broker.rack")
	c.HTTPAddr = ns.get("http.listener")
	if s := ns.get("broker.controllers"); s != "" {
		for _, a := range strings.Split(s, ",") {
			c.Controllers = append(c.Controllers, strings.TrimSpace(a))
		}
	}
	raft, err := parseIDAddrs(ns.get("voters"))
	if err != nil {
		return nc, bad("voters", "%v", err)
	}
	lis, err := parseIDAddrs(ns.get("voter.listeners"))
	if err != nil {
		return nc, bad("voter.listeners", "%v", err)
	}
	for _, ia := range raft {
		l, ok := lookupID(lis, ia.id)
		if !ok {
			return nc, bad("voter.listeners", "has no entry for voter %d (listed in voters)", ia.id)
		}
		c.Voters = append(c.Voters, server.VoterPeer{ID: ia.id, Raft: ia.addr, Listener: l})
	}
	for _, ia := range lis {
		if _, ok := lookupID(raft, ia.id); !ok {
			return nc, bad("voters", "has no entry for voter %d (listed in voter.listeners)", ia.id)
		}
	}
	if c.Voter && c.ListenerAdvertise == "" {
		// The listener reports this voter at its entry in voter.listeners.
		if l, ok := lookupID(lis, c.NodeID); ok {
			c.ListenerAdvertise = l
		}
	}
	// Loaded here so that unreadable files or a certificate naming
	// another node are refused with the other settings; run loads them
	// again with its logger.
	if err := loadTLS(ns, &nc, nil); err != nil {
		return nc, err
	}
	if err := securitySettings(ns, c); err != nil {
		return nc, err
	}
	if err := c.Validate(); err != nil {
		var fe *server.FieldError
		if errors.As(err, &fe) {
			return nc, cfgErr("%s: %s", fieldSetting(ns, fe.Field), fe.Msg)
		}
		return nc, err
	}
	return nc, nil
}

// duration reads a positive duration setting: Go's syntax (9s, 500ms)
// or, as Kafka's *.ms settings are written, a bare number of
// milliseconds.
func (ns nodeSettings) duration(key string) (time.Duration, error) {
	s := ns.get(key)
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseInt(s, 10, 64)
		if err2 != nil {
			return 0, cfgErr("%s: %q is not a duration (like 9s or 500ms)", ns.describe(key), s)
		}
		if ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, cfgErr("%s: %q milliseconds is too long a duration", ns.describe(key), s)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d <= 0 {
		return 0, cfgErr("%s: %q is not positive", ns.describe(key), s)
	}
	return d, nil
}

// fieldSetting names the setting behind a server.Config field.
func fieldSetting(ns nodeSettings, field string) string {
	base, rest, _ := strings.Cut(field, "[")
	entry := ""
	if rest != "" {
		n, tail, _ := strings.Cut(rest, "]")
		i, _ := strconv.Atoi(n)
		entry = fmt.Sprintf(", entry %d", i+1)
		if tail == ".Listener" {
			// voter.listeners may list the voters in another order.
			base, entry = "VoterListeners", ""
		}
	}
	if base == "BrokerID" && ns.get("broker.id") == "" {
		return "broker.id (defaults to node.id)"
	}
	for _, s := range settings {
		if s.field == base {
			d := ns.describe(s.key)
			if entry != "" {
				return d + entry
			}
			return d
		}
	}
	return field
}

type idAddr struct {
	id   int32
	addr string
}

func lookupID(s []idAddr, id int32) (string, bool) {
	for _, ia := range s {
		if ia.id == id {
			return ia.addr, true
		}
	}
	return "", false
}

// parseIDAddrs parses "1@host:port,2@host:port".
func parseIDAddrs(s string) ([]idAddr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []idAddr
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("entry %d %q is not id@host:port", i+1, part)
		}
		v, err := strconv.ParseInt(id, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("entry %d %q: id %q is not a non-negative integer", i+1, part, id)
		}
		if _, dup := lookupID(out, int32(v)); dup {
			return nil, fmt.Errorf("entry %d: voter %d is listed twice", i+1, v)
		}
		out = append(out, idAddr{int32(v), addr})
	}
	return out, nil
}
