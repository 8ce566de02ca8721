package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// SASL login of the admin commands. The password comes from a file or
// from the environment, never from a flag: a flag's value is visible to
// every user of the machine in the process list.

// envSASLPassword holds the --sasl-user's password when no
// --sasl-password-file is given.
const envSASLPassword = "CTRLNODE_SASL_PASSWORD"

// saslFlags are the --sasl-* flags as given.
type saslFlags struct {
	mechanism    string
	user         string
	passwordFile string
}

func (c *cli) addSASLFlags() {
	c.fs.StringVar(&c.saslFlags.mechanism, "sasl-mechanism", "",
		"log in with SASL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (PLAIN only with --tls-ca)")
	c.fs.StringVar(&c.saslFlags.user, "sasl-user", "", "SASL user name, with --sasl-mechanism")
	c.fs.StringVar(&c.saslFlags.passwordFile, "sasl-password-file", "",
		"file whose first line is the SASL password (else $"+envSASLPassword+")")
}

// canonicalMechanism returns the SASL mechanism name s spells, compared
// case-insensitively and with '_' for '-', or "" for none known.
func canonicalMechanism(s string) string {
	switch strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(s)), "_", "-") {
	case "SCRAM-SHA-256":
		return "SCRAM-SHA-256"
	case "SCRAM-SHA-512":
		return "SCRAM-SHA-512"
	case "PLAIN":
		return "PLAIN"
	}
	return ""
}

// readPasswordLine returns the first line of path, without its line end.
func readPasswordLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSuffix(string(line), "\r"), nil
}

// passwordFromFileOrEnv returns the password of a file flag, or else of the
// environment variable env; flagName names the file flag in errors.
func passwordFromFileOrEnv(flagName, file, env string) (string, error) {
	if file != "" {
		p, err := readPasswordLine(file)
		if err != nil {
			return "", usageErr("%s: %v", flagName, err)
		}
		if p == "" {
			return "", usageErr("%s: %s: the first line (the password) is empty", flagName, file)
		}
		return p, nil
	}
	return os.Getenv(env), nil
}

// saslMechanism checks the --sasl-* flags and returns the mechanism to
// log in with, nil for none.
func (c *cli) saslMechanism() (kgosasl.Mechanism, error) {
	if c.saslMech != nil {
		return c.saslMech, nil
	}
	f := c.saslFlags
	if f.mechanism == "" {
		switch {
		case f.user != "":
			return nil, usageErr("--sasl-user needs --sasl-mechanism")
		case f.passwordFile != "":
			return nil, usageErr("--sasl-password-file needs --sasl-mechanism")
		}
		return nil, nil
	}
	mech := canonicalMechanism(f.mechanism)
	if mech == "" {
		return nil, usageErr("--sasl-mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", f.mechanism)
	}
	if f.user == "" {
		return nil, usageErr("--sasl-user is required with --sasl-mechanism")
	}
	pass, err := passwordFromFileOrEnv("--sasl-password-file", f.passwordFile, envSASLPassword)
	if err != nil {
		return nil, err
	}
	if pass == "" {
		return nil, usageErr("--sasl-password-file (or $%s) is required with --sasl-mechanism", envSASLPassword)
	}
	switch mech {
	case "SCRAM-SHA-256":
		c.saslMech = scram.Auth{User: f.user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		c.saslMech = scram.Auth{User: f.user, Pass: pass}.AsSha512Mechanism()
	case "PLAIN":
		// The listeners offer PLAIN only over TLS: the password would
		// otherwise cross the network in the clear.
		if c.tlsFiles.CA == "" {
			return nil, usageErr("--sasl-mechanism PLAIN needs --tls-ca: PLAIN sends the password as it is")
		}
		c.saslMech = plain.Auth{User: f.user, Pass: pass}.AsMechanism()
	}
	return c.saslMech, nil
}

// saslLoginRefused reports whether err is a failed SASL login: asking again
// with the same credentials cannot succeed.
func saslLoginRefused(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState)
}

// permanent returns the error to stop on when err, a failed connection,
// will fail the same way on every voter and every retry: a refused login,
// or a listener that requires a client certificate when none was given.
// It returns nil for errors worth retrying.
func (c *cli) permanent(err error) error {
	if saslLoginRefused(err) {
		return err
	}
	if c.tlsFiles.Cert == "" && c.tlsFiles.CA != "" {
		if msg := err.Error(); strings.Contains(msg, "tls: certificate required") || strings.Contains(msg, "tls: bad certificate") {
			return usageErr("the listener requires a client certificate: give --tls-cert and --tls-key with --tls-ca (%v)", err)
		}
	}
	return nil
}

// caOnlyDialer is the TLS dialler of --tls-ca given alone: it verifies
// the server against the CA bundle and the host name dialled, and
// presents no certificate (the client logs in with SASL instead).
func caOnlyDialer(caFile string) (kafkaclient.DialFunc, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, usageErr("--tls-ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageErr("--tls-ca: %s holds no PEM certificate", caFile)
	}
	return kafkaclient.TLSDialer(nil, &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}), nil
}
