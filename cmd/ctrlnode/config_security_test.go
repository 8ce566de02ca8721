package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/server"
)

func TestSecuritySettings(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := server.BuildNodeConfig(validSettings(t, map[string]string{
		"sasl.enabled.mechanisms": "scram-sha-512,SCRAM-SHA-256", "super.users": "User:admin; User:ops",
		"sasl.bootstrap.user": "admin", "sasl.bootstrap.password.file": pw,
	}))
	if err != nil {
		t.Fatal(err)
	}
	sec := nc.Security
	if len(sec.SASLMechanisms) != 2 || sec.SASLMechanisms[0] != "SCRAM-SHA-512" || len(sec.SuperUsers) != 2 ||
		len(sec.BootstrapUsers) != 1 || sec.BootstrapUsers[0].Password != "s3cret" || nc.SASL == nil || nc.SASL.Name() != "SCRAM-SHA-512" {
		t.Fatalf("security config: %+v, node login %v", sec, nc.SASL)
	}

	for _, tc := range []struct {
		extra map[string]string
		want  string
	}{
		{map[string]string{"sasl.enabled.mechanisms": "GSSAPI"}, `sasl.enabled.mechanisms (from flag --sasl-enabled-mechanisms): "GSSAPI" is not one of`},
		{map[string]string{"super.users": "admin"}, `super.users (from flag --super-users): "admin" is not a principal`},
		{map[string]string{"authorizer.enforce": "maybe"}, `authorizer.enforce (from flag --authorizer-enforce): "maybe" is not true or false`},
		{map[string]string{"sasl.bootstrap.user": "admin", "sasl.bootstrap.password.file": pw}, "needs sasl.enabled.mechanisms"},
		{map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.bootstrap.user": "admin", "sasl.bootstrap.password.file": empty}, "has no password on its first line"},
		{map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.bootstrap.password.file": pw}, "sasl.bootstrap.user: required"},
		{map[string]string{"sasl.user": "node", "sasl.password.file": pw, "sasl.mechanism": "PLAIN"}, "only with TLS"},
		{map[string]string{"sasl.user": "node", "sasl.password.file": pw, "super.users": "User:admin"}, `"node" is not in super.users`},
		{map[string]string{"sasl.password.file": pw}, "sasl.user: required with sasl.password.file"},
	} {
		_, err := server.BuildNodeConfig(validSettings(t, tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.extra, err, tc.want)
		}
	}
}
