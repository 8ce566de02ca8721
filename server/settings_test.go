package server

import (
	"reflect"
	"strings"
	"testing"
)

// TestSettingsTable: keys are unique, every Field is a field of
// NodeConfig or names one Validate reports, at most one setting fills a
// field, and a setting read into its Field takes its own default.
func TestSettingsTable(t *testing.T) {
	keys, fields := map[string]bool{}, map[string]string{}
	pseudo := map[string]bool{"Roles": true, "VoterListeners": true} // named by Validate or fieldSetting, no field of their own
	for _, s := range Settings() {
		if keys[s.Key] {
			t.Errorf("%s is defined twice", s.Key)
		}
		keys[s.Key] = true
		if s.Field == "" {
			if s.stage != together {
				t.Errorf("%s is read on its own but fills no field", s.Key)
			}
			continue
		}
		if other, dup := fields[s.Field]; dup {
			t.Errorf("%s and %s both fill %s", other, s.Key, s.Field)
		}
		fields[s.Field] = s.Key
		var nc NodeConfig
		if base, _, entry := strings.Cut(s.Field, "["); entry {
			// One entry of a map field, filled by the setting's parse.
			if f := nc.field(base); !f.IsValid() || f.Kind() != reflect.Map || s.parse == nil {
				t.Errorf("%s: %s is not a map field of NodeConfig filled by a parse", s.Key, base)
			}
			continue
		}
		f := nc.field(s.Field)
		if !f.IsValid() {
			if !pseudo[s.Field] {
				t.Errorf("%s: NodeConfig has no field %s", s.Key, s.Field)
			}
			continue
		}
		if s.stage != together && s.parse == nil {
			if err := setField(f, s.Default); err != nil {
				t.Errorf("%s: its default %q: %v", s.Key, s.Default, err)
			}
		}
	}
}

// TestBuildNodeConfigReadsInStages: of several bad settings the first one
// read is refused: the roles before the ids, the timeouts and limits
// before the other values, those before the TLS files are loaded.
func TestBuildNodeConfigReadsInStages(t *testing.T) {
	for _, tc := range []struct {
		bad  map[string]string
		want string
	}{
		{map[string]string{"node.id": "x", "roles": "nope"}, "roles (from flag --roles): unknown role"},
		{map[string]string{"broker.id": "x", "node.id": "y"}, "node.id (from flag --node-id): \"y\""},
		{map[string]string{"raft.snapshot.threshold": "0", "shutdown.timeout": "soon"}, "shutdown.timeout (from flag --shutdown-timeout)"},
		{map[string]string{"pprof": "maybe", "raft.tls.max.handshakes": "0"}, "raft.tls.max.handshakes (from flag --raft-tls-max-handshakes)"},
		{map[string]string{"log.level": "loud", "voters": "x"}, "log.level (from flag --log-level)"},
		{map[string]string{"super.users": "admin", "voters": "x"}, "voters (from flag --voters)"},
		{map[string]string{"tls.cert.file": "/c", "roles": "nope"}, "tls.ca.file: required"},
	} {
		flags := map[string]string{"node.id": "1001", "data.dir": "/tmp/x", "raft.listener": "127.0.0.1:9093", "listener": "127.0.0.1:9092",
			"voters": "1001@127.0.0.1:9093", "voter.listeners": "1001@127.0.0.1:9092"}
		for k, v := range tc.bad {
			flags[k] = v
		}
		vals, err := ResolveSettings(nil, nil, flags)
		if err != nil {
			t.Fatal(err)
		}
		_, err = BuildNodeConfig(vals)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.bad, err, tc.want)
		}
	}
}
