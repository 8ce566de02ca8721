package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/server"
)

// limitNode is the flags of a valid node with both roles, so that both
// Kafka listeners run.
var limitNode = map[string]string{
	"node.id": "1001", "roles": "voter,broker", "broker.id": "1", "broker.listener": "127.0.0.1:0",
	"data.dir": "/tmp/x", "raft.listener": "127.0.0.1:9093", "listener": "127.0.0.1:9092",
	"voters": "1001@127.0.0.1:9093", "voter.listeners": "1001@127.0.0.1:9092",
}

// buildFrom builds a node from a config file's text, an environment and
// flags, on top of limitNode.
func buildFrom(t *testing.T, file string, env []string, flags map[string]string) (server.SettingValues, server.NodeConfig, error) {
	t.Helper()
	fv, err := server.ParseSettings(strings.NewReader(file), "n.conf")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{}
	for k, v := range limitNode {
		all[k] = v
	}
	for k, v := range flags {
		all[k] = v
	}
	ns, err := server.ResolveSettings(fv, env, all)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := server.BuildNodeConfig(ns)
	return ns, nc, err
}

// limitField is where a limit setting lands in server.Config: the field
// the setting names.
func limitField(t *testing.T, c *server.Config, key string) any {
	t.Helper()
	for _, s := range server.LimitSettings() {
		if s.Key == key {
			v := reflect.ValueOf(*c)
			for _, name := range strings.Split(s.Field, ".") {
				v = v.FieldByName(name)
			}
			return v.Interface()
		}
	}
	t.Fatalf("no field for %s", key)
	return nil
}

func isDurationSetting(s server.Setting) bool { return strings.HasSuffix(s.Key, ".timeout") }

// TestLimitSettingsPrecedence: every limit setting is taken from a file,
// the environment or a flag, a flag over the environment over the file,
// and lands in its server.Config field.
func TestLimitSettingsPrecedence(t *testing.T) {
	for _, s := range server.LimitSettings() {
		vals, want := []string{"2000", "3000", "4000"}, []any{2000, 3000, 4000}
		switch {
		case isDurationSetting(s):
			vals, want = []string{"7s", "8000", "9s"}, []any{7 * time.Second, 8 * time.Second, 9 * time.Second}
		case strings.HasSuffix(s.Key, ".max.in.flight"):
			vals, want = []string{"2", "3", "4"}, []any{2, 3, 4}
		case strings.HasSuffix(s.Key, ".max.queued.bytes"):
			// Not below the default max.frame.bytes.
			vals, want = []string{"200000000", "300000000", "400000000"}, []any{200000000, 300000000, 400000000}
		}
		file := s.Key + " = " + vals[0] + "\n"
		env := []string{server.EnvName(s.Key) + "=" + vals[1]}
		flags := map[string]string{s.Key: vals[2]}
		for i, tc := range []struct {
			env    []string
			flags  map[string]string
			source string
		}{
			{nil, nil, "n.conf line 1"},
			{env, nil, "env " + server.EnvName(s.Key)},
			{env, flags, "flag --" + server.FlagName(s.Key)},
		} {
			ns, nc, err := buildFrom(t, file, tc.env, tc.flags)
			if err != nil {
				t.Fatalf("%s = %s: %v", s.Key, vals[i], err)
			}
			if got := ns[s.Key].Source; got != tc.source {
				t.Errorf("%s: source %q, want %q", s.Key, got, tc.source)
			}
			got := limitField(t, &nc.Config, s.Key)
			if w := want[i]; fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s = %s from %s: field holds %v, want %v", s.Key, vals[i], tc.source, got, w)
			}
		}
	}
}

// TestLimitSettingsRefused: a bad limit is refused naming the setting
// and where it was set.
func TestLimitSettingsRefused(t *testing.T) {
	for _, s := range server.LimitSettings() {
		bad := map[string]string{"0": `"0" is not positive`, "-1": `"-1" is not positive`, "lots": `"lots" is not a whole number`,
			"99999999999999999999": "is above the hard limit", "-99999999999999999999": "is not positive"}
		if isDurationSetting(s) {
			bad = map[string]string{"0": `"0" is not positive`, "0s": `"0s" is not positive`, "-5s": `"-5s" is not positive`,
				"soon": `"soon" is not a duration`}
		}
		for v, want := range bad {
			_, _, err := buildFrom(t, "", nil, map[string]string{s.Key: v})
			prefix := s.Key + " (from flag --" + server.FlagName(s.Key) + "): "
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s = %s: err = %v, want %q%s", s.Key, v, err, prefix, want)
			}
		}
	}
	for _, tc := range []struct {
		file string
		env  []string
		want string
	}{
		{"listener.max.frame.bytes = 2147483648\n", nil, "listener.max.frame.bytes (from n.conf line 1): 2147483648 is above the hard limit 2147483647"},
		{"", []string{"CTRLNODE_BROKER_LISTENER_MAX_FRAME_BYTES=100"}, "broker.listener.max.frame.bytes (from env CTRLNODE_BROKER_LISTENER_MAX_FRAME_BYTES): 100 is below 1024 bytes"},
		{"listener.max.in.flight = 1025\n", nil, "listener.max.in.flight (from n.conf line 1): 1025 is above 1024"},
		{"listener.max.queued.bytes = 1000000\n", nil, "listener.max.queued.bytes (from n.conf line 1): 1000000 is below MaxFrameBytes (104857600)"},
		{"", []string{"CTRLNODE_LISTENER_MAX_UNAUTHENTICATED_FRAME_BYTES=512"}, "listener.max.unauthenticated.frame.bytes (from env CTRLNODE_LISTENER_MAX_UNAUTHENTICATED_FRAME_BYTES): 512 is below 1024 bytes"},
		{"", []string{"CTRLNODE_RAFT_TLS_HANDSHAKE_TIMEOUT=0"}, `raft.tls.handshake.timeout (from env CTRLNODE_RAFT_TLS_HANDSHAKE_TIMEOUT): "0" is not positive`},
		{"broker.listener.write.timeout = 1h\nbroker.listener.max.connections = 1e4\n", nil, `broker.listener.max.connections (from n.conf line 2): "1e4" is not a whole number`},
	} {
		_, _, err := buildFrom(t, tc.file, tc.env, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q %v: err = %v, want %q", tc.file, tc.env, err, tc.want)
		}
	}
}

// TestLimitDefaults: unset limits are kafkawire's and the raft stream
// layer's own defaults, so a node that sets none runs as before.
func TestLimitDefaults(t *testing.T) {
	_, nc, err := buildFrom(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := server.WireLimits{MaxFrameBytes: 100 << 20, IdleTimeout: 10 * time.Minute, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, MaxConns: 10000, MaxInFlight: 1, MaxQueuedBytes: 256 << 20, MaxUnauthenticatedFrameBytes: 512 << 10}
	if nc.ListenerLimits != want || nc.BrokerListenerLimits != want {
		t.Errorf("limits %+v and %+v, want %+v", nc.ListenerLimits, nc.BrokerListenerLimits, want)
	}
	if nc.RaftHandshakeTimeout != 10*time.Second || nc.RaftMaxHandshakes != 64 {
		t.Errorf("raft handshakes %v, %d; want 10s, 64", nc.RaftHandshakeTimeout, nc.RaftMaxHandshakes)
	}
}

// TestLimitSettingsInHelp: `ctrlnode run --help` lists every limit with
// its default.
func TestLimitSettingsInHelp(t *testing.T) {
	code, out, errOut := runCmd("run", "--help")
	help := out + errOut
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, s := range server.LimitSettings() {
		if !strings.Contains(help, "-"+server.FlagName(s.Key)+" ") || !strings.Contains(help, `(default "`+s.Default+`")`) {
			t.Errorf("--help lacks %s with its default %s", s.Key, s.Default)
		}
	}
	if !strings.Contains(help, "socket.request.max.bytes") || !strings.Contains(help, "connections.max.idle.ms") {
		t.Error("--help does not give Kafka's names of the limits")
	}
}
