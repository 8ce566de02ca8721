package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// securitySettings fills the listener's client security and the node's
// own SASL login from the sasl.*, super.users and authorizer.* settings.
func securitySettings(ns nodeSettings, c *server.Config) error {
	bad := func(key, format string, args ...any) error {
		return cfgErr("%s: %s", ns.describe(key), fmt.Sprintf(format, args...))
	}
	var sec listener.SecurityConfig
	for _, m := range splitSettingList(ns.get("sasl.enabled.mechanisms"), ",") {
		m = strings.ToUpper(m)
		if !sasl.IsScram(m) && m != sasl.Plain {
			return bad("sasl.enabled.mechanisms", "%q is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN", m)
		}
		sec.SASLMechanisms = append(sec.SASLMechanisms, m)
	}
	for _, u := range splitSettingList(ns.get("super.users"), ";,") {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return bad("super.users", "%q is not a principal like User:admin", u)
		}
		sec.SuperUsers = append(sec.SuperUsers, u)
	}
	switch ns.get("authorizer.enforce") {
	case "true", "1", "yes":
		sec.Authorize = true
	case "false", "0", "no", "":
	default:
		return bad("authorizer.enforce", "%q is not true or false", ns.get("authorizer.enforce"))
	}

	var bootPass string
	bootUser := ns.get("sasl.bootstrap.user")
	if bootUser != "" || ns.get("sasl.bootstrap.password.file") != "" {
		if bootUser == "" {
			return bad("sasl.bootstrap.user", "required with sasl.bootstrap.password.file")
		}
		if len(sec.SASLMechanisms) == 0 {
			return bad("sasl.bootstrap.user", "needs sasl.enabled.mechanisms (nobody logs in with SASL otherwise)")
		}
		var err error
		if bootPass, err = readSecret(ns, "sasl.bootstrap.password.file"); err != nil {
			return err
		}
		sec.BootstrapUsers = []listener.BootstrapUser{{Name: bootUser, Password: bootPass, Mechanism: sasl.ScramSHA512}}
	}

	user, mech := ns.get("sasl.user"), strings.ToUpper(ns.get("sasl.mechanism"))
	var pass string
	switch {
	case user != "":
		var err error
		if pass, err = readSecret(ns, "sasl.password.file"); err != nil {
			return err
		}
	case ns.get("sasl.password.file") != "":
		return bad("sasl.user", "required with sasl.password.file")
	case bootUser != "":
		user, pass, mech = bootUser, bootPass, sasl.ScramSHA512
	}
	if user != "" {
		switch mech {
		case sasl.ScramSHA256:
			c.SASL = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case sasl.ScramSHA512:
			c.SASL = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		case sasl.Plain:
			if c.TLS == nil && c.ListenerTLS == nil && c.BrokerListenerTLS == nil {
				return bad("sasl.mechanism", "PLAIN sends the password in the clear: only with TLS (tls.*.file)")
			}
			c.SASL = plain.Auth{User: user, Pass: pass}.AsMechanism()
		default:
			return bad("sasl.mechanism", "%q is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN", mech)
		}
		if len(sec.SuperUsers) > 0 && !contains(sec.SuperUsers, "User:"+user) {
			return bad("sasl.user", "%q is not in super.users: voters forward requests and brokers register with this login", user)
		}
	}
	c.Security = sec
	return nil
}

// readSecret reads the first line of the file a setting names.
func readSecret(ns nodeSettings, key string) (string, error) {
	path := ns.get(key)
	if path == "" {
		return "", cfgErr("%s: required", ns.describe(key))
	}
	f, err := os.Open(path)
	if err != nil {
		return "", cfgErr("%s: %v", ns.describe(key), err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) == "" {
		return "", cfgErr("%s: %s has no password on its first line", ns.describe(key), path)
	}
	return strings.TrimRight(sc.Text(), "\r"), nil
}

func splitSettingList(s, seps string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
