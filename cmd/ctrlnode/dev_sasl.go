package main

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

// devSecurity is dev mode's client security: zero without --sasl.
type devSecurity struct {
	listener     listener.SecurityConfig
	login        kgosasl.Mechanism
	passwordFile string
}

// devSASL sets up dev mode's SASL: user admin, a super user created at
// bootstrap, with a random password kept in <data>/sasl-admin.password so
// that a restart keeps the same one (the credential is in the log).
func devSASL(dataDir string, withTLS bool) (devSecurity, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return devSecurity{}, err
	}
	file, err := filepath.Abs(filepath.Join(dataDir, "sasl-admin.password"))
	if err != nil {
		return devSecurity{}, err
	}
	pass := ""
	switch data, err := os.ReadFile(file); {
	case err == nil:
		pass = strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
		if pass == "" {
			return devSecurity{}, errors.New(file + " has no password on its first line")
		}
	case errors.Is(err, os.ErrNotExist):
		var b [18]byte
		if _, err := rand.Read(b[:]); err != nil {
			return devSecurity{}, err
		}
		pass = base64.RawURLEncoding.EncodeToString(b[:])
		if err := os.WriteFile(file, []byte(pass+"\n"), 0o600); err != nil {
			return devSecurity{}, err
		}
	default:
		return devSecurity{}, err
	}
	mechs := []string{sasl.ScramSHA512, sasl.ScramSHA256}
	if withTLS {
		mechs = append(mechs, sasl.Plain)
	}
	return devSecurity{
		listener: listener.SecurityConfig{
			SASLMechanisms: mechs,
			SuperUsers:     []string{"User:admin"},
			BootstrapUsers: []listener.BootstrapUser{{Name: "admin", Password: pass, Mechanism: sasl.ScramSHA512}},
		},
		login:        scram.Auth{User: "admin", Pass: pass}.AsSha512Mechanism(),
		passwordFile: file,
	}, nil
}
