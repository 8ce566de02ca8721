package devcluster

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// Security is the cluster's client security: SASL on the voters'
// listeners and every node's own login.
type Security struct {
	Listener listener.SecurityConfig
	Login    kgosasl.Mechanism
	// PasswordFile holds the admin user's password.
	PasswordFile string
}

// SASL sets up the cluster's SASL: user admin, a super user created at
// bootstrap, with a random password kept in <data>/sasl-admin.password so
// that a restart keeps the same one (the credentials are in the log):
// SCRAM-SHA-512 and SCRAM-SHA-256 verifiers of it, and PLAIN with TLS.
func SASL(dataDir string, withTLS bool) (Security, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return Security{}, err
	}
	file, err := filepath.Abs(filepath.Join(dataDir, "sasl-admin.password"))
	if err != nil {
		return Security{}, err
	}
	pass := ""
	switch data, err := os.ReadFile(file); {
	case err == nil:
		pass = strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
		if pass == "" {
			return Security{}, errors.New(file + " has no password on its first line")
		}
	case errors.Is(err, os.ErrNotExist):
		var b [18]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Security{}, err
		}
		pass = base64.RawURLEncoding.EncodeToString(b[:])
		if err := os.WriteFile(file, []byte(pass+"\n"), 0o600); err != nil {
			return Security{}, err
		}
	default:
		return Security{}, err
	}
	mechs := []string{sasl.ScramSHA512, sasl.ScramSHA256}
	if withTLS {
		mechs = append(mechs, sasl.Plain)
	}
	return Security{
		Listener: listener.SecurityConfig{
			SASLMechanisms: mechs,
			SuperUsers:     []string{"User:admin"},
			// Both SCRAM mechanisms, so that a client configured for
			// either logs in with the printed password.
			BootstrapUsers: []listener.BootstrapUser{
				{Name: "admin", Password: pass, Mechanism: sasl.ScramSHA512},
				{Name: "admin", Password: pass, Mechanism: sasl.ScramSHA256},
			},
		},
		Login:        scram.Auth{User: "admin", Pass: pass}.AsSha512Mechanism(),
		PasswordFile: file,
	}, nil
}
