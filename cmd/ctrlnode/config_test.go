package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/server"
)

func TestConfigPrecedenceFlagEnvFileDefault(t *testing.T) {
	file, err := server.ParseSettings(strings.NewReader("# c\nnode.id = 1\nsession.timeout = 5s\nbroker.rack = r1\n"), "n.conf")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := server.ResolveSettings(file, []string{"PATH=/bin", "CTRLNODE_NODE_ID=2", "CTRLNODE_BROKER_RACK=r2"}, map[string]string{"node.id": "3"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][2]string{
		"node.id":         {"3", "flag --node-id"},
		"broker.rack":     {"r2", "env CTRLNODE_BROKER_RACK"},
		"session.timeout": {"5s", "n.conf line 3"},
		"roles":           {"voter", "default"},
	} {
		if v := ns[key]; v.Value != want[0] || v.Source != want[1] {
			t.Errorf("%s = %q from %q, want %q from %q", key, v.Value, v.Source, want[0], want[1])
		}
	}
}

func TestConfigFileErrorsNameLineAndKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"node.idd = 1\n", `f line 1: unknown setting "node.idd" (did you mean "node.id"?)`},
		{"node.id = 1\nnode.id = 2\n", "f line 2: node.id is set twice (first at f line 1)"},
		{"\n\nnode.id\n", `f line 3: "node.id" is not key = value`},
	} {
		_, err := server.ParseSettings(strings.NewReader(tc.in), "f")
		if err == nil || err.Error() != tc.want {
			t.Errorf("server.ParseSettings(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func validSettings(t *testing.T, extra map[string]string) server.SettingValues {
	t.Helper()
	flags := map[string]string{
		"node.id": "1001", "data.dir": "/tmp/x", "raft.listener": "127.0.0.1:9093", "listener": "127.0.0.1:9092",
		"voters":          "1001@127.0.0.1:9093,1002@127.0.0.1:9193,1003@127.0.0.1:9293",
		"voter.listeners": "1003@127.0.0.1:9292,1001@127.0.0.1:9092,1002@127.0.0.1:9192",
	}
	for k, v := range extra {
		flags[k] = v
	}
	ns, err := server.ResolveSettings(nil, nil, flags)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestBuildNodeConfigOfAVoterAndBroker(t *testing.T) {
	nc, err := server.BuildNodeConfig(validSettings(t, map[string]string{"roles": "voter,broker", "broker.id": "1",
		"broker.listener": "127.0.0.1:0", "session.timeout": "4000", "http.listener": "127.0.0.1:0", "pprof": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	c := nc.Config
	if !c.Voter || !c.Broker || c.NodeID != 1001 || c.BrokerID != 1 || !c.Pprof {
		t.Fatalf("config %+v", c)
	}
	if c.SessionTimeout != 4*time.Second {
		t.Fatalf("session.timeout 4000 (ms) = %v", c.SessionTimeout)
	}
	if len(c.Voters) != 3 || c.Voters[1].ID != 1002 || c.Voters[1].Listener != "127.0.0.1:9192" {
		t.Fatalf("voters %+v", c.Voters)
	}
	if c.ListenerAdvertise != "127.0.0.1:9092" {
		t.Fatalf("the listener is advertised at %q, want this voter's voter.listeners entry", c.ListenerAdvertise)
	}
}

func TestBuildNodeConfigNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		extra map[string]string
		want  string
	}{
		{map[string]string{"voters": "1001@127.0.0.1:9093,1002@127.0.0.1:9193"}, "voters (from flag --voters): has no entry for voter 1003 (listed in voter.listeners)"},
		{map[string]string{"http.listener": "localhost"}, "http.listener (from flag --http-listener): \"localhost\" is not host:port"},
		{map[string]string{"voters": "1001@127.0.0.1:9093,1002@127.0.0.1:0,1003@127.0.0.1:9293"}, "voters (from flag --voters), entry 2: \"127.0.0.1:0\" needs a port other than 0"},
		{map[string]string{"voter.listeners": "1001@127.0.0.1:9092,1002@127.0.0.1:x,1003@127.0.0.1:9292"}, "voter.listeners (from flag --voter-listeners): \"127.0.0.1:x\" is not host:port"},
		{map[string]string{"roles": "broker", "node.id": "5", "broker.listener": "127.0.0.1:0", "broker.heartbeat.interval": "20s"}, "broker.heartbeat.interval (from flag --broker-heartbeat-interval): 20s is not below the session timeout 9s"},
		{map[string]string{"roles": "broker", "broker.listener": "127.0.0.1:0"}, "broker.id (defaults to node.id): 1001 is also a voter id"},
		{map[string]string{"data.dir": ""}, "data.dir (from flag --data-dir): required for a voter"},
		{map[string]string{"pprof": "maybe"}, "pprof (from flag --pprof): \"maybe\" is not true or false"},
		{map[string]string{"raft.snapshot.threshold": "0"}, "raft.snapshot.threshold (from flag --raft-snapshot-threshold): \"0\" is not positive"},
		{map[string]string{"raft.snapshot.threshold": "lots"}, "raft.snapshot.threshold (from flag --raft-snapshot-threshold): \"lots\" is not a whole number"},
		{map[string]string{"raft.snapshot.interval": "often"}, "raft.snapshot.interval (from flag --raft-snapshot-interval): \"often\" is not a duration"},
		{map[string]string{"raft.snapshot.interval": "-1s"}, "raft.snapshot.interval (from flag --raft-snapshot-interval): \"-1s\" is not positive"},
		{map[string]string{"raft.snapshot.interval": "1ms"}, "raft.snapshot.interval (from flag --raft-snapshot-interval): 1ms is below 5ms, raft's minimum"},
		{map[string]string{"raft.trailing.logs": "-64"}, "raft.trailing.logs (from flag --raft-trailing-logs): \"-64\" is not positive"},
		{map[string]string{"raft.trailing.logs": "99999999999999999999"}, "raft.trailing.logs (from flag --raft-trailing-logs): 99999999999999999999 is above the hard limit"},
	} {
		_, err := server.BuildNodeConfig(validSettings(t, tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// TestDurationSettings: a duration is Go's syntax or a bare number of
// milliseconds, positive either way.
func TestDurationSettings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"5s", 5 * time.Second, ""},
		{"1500", 1500 * time.Millisecond, ""},
		{"0", 0, `"0" is not positive`},
		{"-20", 0, `"-20" is not positive`},
		{"0s", 0, `"0s" is not positive`},
		{"soon", 0, `"soon" is not a duration`},
		{"9223372036854775807", 0, "too long a duration"},
	} {
		ns, err := server.ResolveSettings(nil, nil, map[string]string{"session.timeout": tc.in})
		if err != nil {
			t.Fatal(err)
		}
		d, err := ns.Duration("session.timeout")
		if tc.err == "" {
			if err != nil || d != tc.want {
				t.Errorf("%q = %v, %v; want %v", tc.in, d, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), "session.timeout (from flag --session-timeout): ") || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
		}
	}
}
