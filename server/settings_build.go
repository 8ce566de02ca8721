package server

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// NodeConfig is a node's configuration as its settings give it: the
// Config to start it with, and what the process that runs it needs
// besides.
type NodeConfig struct {
	Config
	LogLevel        string
	ShutdownTimeout time.Duration
	// TLSFiles are the tls.*.file settings, all empty without TLS.
	TLSFiles tlsconfig.Files
	// OwnTLSFiles are the files of the listeners that have their own, by
	// the prefix of their settings ("raft.tls.").
	OwnTLSFiles map[string]tlsconfig.Files

	vals SettingValues
}

// BuildNodeConfig turns settings' values into a NodeConfig, refusing bad
// values with a message that names the setting and where it was set. It
// loads the TLS files to check them, without a logger; LoadTLS loads them
// again with one.
func BuildNodeConfig(vals SettingValues) (NodeConfig, error) {
	nc := NodeConfig{vals: vals}
	if err := nc.tlsFileSettings(); err != nil {
		return nc, err
	}
	if err := nc.read(stageRoles, stageIDs); err != nil {
		return nc, err
	}
	if err := nc.defaultIDs(); err != nil {
		return nc, err
	}
	if err := nc.read(stageLimits, stageValues); err != nil {
		return nc, err
	}
	if err := nc.voterSettings(); err != nil {
		return nc, err
	}
	if err := nc.LoadTLS(nil); err != nil {
		return nc, err
	}
	if err := nc.read(stageSecurity); err != nil {
		return nc, err
	}
	if err := nc.loginSettings(); err != nil {
		return nc, err
	}
	if err := nc.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nc, cfgErr("%s: %s", nc.fieldSetting(fe.Field), fe.Msg)
		}
		return nc, err
	}
	return nc, nil
}

// read reads the settings of the stages, stage by stage, each in the
// order of Settings.
func (nc *NodeConfig) read(stages ...stage) error {
	for _, st := range stages {
		for _, s := range settings {
			if s.stage != st {
				continue
			}
			v := nc.vals.Get(s.Key)
			var err error
			if s.parse != nil {
				err = s.parse(nc, v)
			} else {
				err = setField(nc.field(s.Field), v)
			}
			if err != nil {
				return nc.bad(s.Key, "%v", err)
			}
		}
	}
	return nil
}

func (nc *NodeConfig) bad(key, format string, args ...any) error {
	return cfgErr("%s: %s", nc.vals.Describe(key), fmt.Sprintf(format, args...))
}

// field is the field of nc at path ("ListenerLimits.MaxFrameBytes").
func (nc *NodeConfig) field(path string) reflect.Value {
	v := reflect.ValueOf(nc).Elem()
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}

// setField sets a field from a setting's value as the field's type takes
// it: a string as it is; a bool from true or false (1 or 0, yes or no,
// empty for false); a time.Duration in Go's syntax (9s, 500ms) or, as
// Kafka's *.ms settings are written, a bare number of milliseconds; a
// whole number that fits the field. A duration or number must be
// positive: zero would mean "the default" to the server, which the
// setting's default already says. Ranges narrower than the type's are
// for Config.Validate to check, so that they hold for every caller.
func setField(f reflect.Value, s string) error {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := parseDuration(s)
		f.SetInt(int64(d))
		return err
	case f.Kind() == reflect.String:
		f.SetString(s)
		return nil
	case f.Kind() == reflect.Bool:
		b, err := parseBool(s)
		f.SetBool(b)
		return err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("%q is not a whole number", s)
	case n <= 0:
		return fmt.Errorf("%q is not positive", s)
	}
	limit := int64(math.MaxInt64)
	switch f.Kind() {
	case reflect.Int32:
		limit = math.MaxInt32
	case reflect.Int:
		limit = math.MaxInt
	case reflect.Int64, reflect.Uint64:
	default:
		panic(fmt.Sprintf("setting of a field of unsupported type %v", f.Type()))
	}
	if err != nil || n > limit {
		return fmt.Errorf("%s is above the hard limit %d", s, limit)
	}
	if f.Kind() == reflect.Uint64 {
		f.SetUint(uint64(n))
	} else {
		f.SetInt(n)
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseInt(s, 10, 64)
		if err2 != nil {
			return 0, fmt.Errorf("%q is not a duration (like 9s or 500ms)", s)
		}
		if ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, fmt.Errorf("%q milliseconds is too long a duration", s)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// Duration reads key as a positive duration setting: Go's syntax (9s,
// 500ms) or a bare number of milliseconds.
func (vs SettingValues) Duration(key string) (time.Duration, error) {
	d, err := parseDuration(vs.Get(key))
	if err != nil {
		return 0, cfgErr("%s: %v", vs.Describe(key), err)
	}
	return d, nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

func readRoles(nc *NodeConfig, v string) error {
	for _, role := range strings.Split(v, ",") {
		switch strings.TrimSpace(role) {
		case "voter", "controller":
			nc.Voter = true
		case "broker":
			nc.Broker = true
		case "":
		default:
			return fmt.Errorf("unknown role %q: want voter, broker or voter,broker", strings.TrimSpace(role))
		}
	}
	if !nc.Voter && !nc.Broker {
		return errors.New("empty: want voter, broker or voter,broker")
	}
	return nil
}

// readNodeID reads node.id, required with the voter role; -1 if unset.
func readNodeID(nc *NodeConfig, v string) (err error) {
	nc.NodeID, err = parseID(v, nc.Voter)
	return err
}

// readBrokerID reads broker.id; -1 if unset.
func readBrokerID(nc *NodeConfig, v string) (err error) {
	nc.BrokerID, err = parseID(v, false)
	return err
}

func parseID(s string, required bool) (int32, error) {
	if s == "" {
		if required {
			return 0, errors.New("required")
		}
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	return int32(v), nil
}

// defaultIDs gives a broker without broker.id its node.id, and a node
// without the voter role and node.id its broker.id.
func (nc *NodeConfig) defaultIDs() error {
	if nc.Broker && nc.BrokerID < 0 {
		if nc.Voter {
			return nc.bad("broker.id", "required when a node has both roles (voter and broker ids must differ)")
		}
		if nc.NodeID < 0 {
			return nc.bad("node.id", "required (or set broker.id)")
		}
		nc.BrokerID = nc.NodeID
	}
	if !nc.Voter && nc.NodeID < 0 {
		nc.NodeID = nc.BrokerID
	}
	return nil
}

func readControllers(nc *NodeConfig, v string) error {
	if v != "" {
		for _, a := range strings.Split(v, ",") {
			nc.Controllers = append(nc.Controllers, strings.TrimSpace(a))
		}
	}
	return nil
}

func readLogLevel(nc *NodeConfig, v string) error {
	switch v {
	case "trace", "debug", "info", "warn", "error":
		nc.LogLevel = v
		return nil
	}
	return fmt.Errorf("%q is not one of trace, debug, info, warn, error", v)
}

// voterSettings reads voters and voter.listeners into Voters, which must
// list the same voters, and advertises this voter's listener at its entry
// in voter.listeners unless advertised.listener is set.
func (nc *NodeConfig) voterSettings() error {
	raft, err := parseIDAddrs(nc.vals.Get("voters"))
	if err != nil {
		return nc.bad("voters", "%v", err)
	}
	lis, err := parseIDAddrs(nc.vals.Get("voter.listeners"))
	if err != nil {
		return nc.bad("voter.listeners", "%v", err)
	}
	for _, ia := range raft {
		l, ok := lookupID(lis, ia.id)
		if !ok {
			return nc.bad("voter.listeners", "has no entry for voter %d (listed in voters)", ia.id)
		}
		nc.Voters = append(nc.Voters, VoterPeer{ID: ia.id, Raft: ia.addr, Listener: l})
	}
	for _, ia := range lis {
		if _, ok := lookupID(raft, ia.id); !ok {
			return nc.bad("voters", "has no entry for voter %d (listed in voter.listeners)", ia.id)
		}
	}
	if nc.Voter && nc.ListenerAdvertise == "" {
		if l, ok := lookupID(lis, nc.NodeID); ok {
			nc.ListenerAdvertise = l
		}
	}
	return nil
}

// fieldSetting names the setting behind a FieldError's field.
func (nc *NodeConfig) fieldSetting(field string) string {
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
	if base == "BrokerID" && nc.vals.Get("broker.id") == "" {
		return "broker.id (defaults to node.id)"
	}
	for _, s := range settings {
		if s.Field != "" && s.Field == base {
			return nc.vals.Describe(s.Key) + entry
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
