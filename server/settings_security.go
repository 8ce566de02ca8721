package server

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

func readMechanisms(nc *NodeConfig, v string) error {
	for _, m := range splitSettingList(v, ",") {
		m = strings.ToUpper(m)
		if !sasl.IsScram(m) && m != sasl.Plain {
			return fmt.Errorf("%q is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN", m)
		}
		nc.Security.SASLMechanisms = append(nc.Security.SASLMechanisms, m)
	}
	return nil
}

func readSuperUsers(nc *NodeConfig, v string) error {
	for _, u := range splitSettingList(v, ";,") {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("%q is not a principal like User:admin", u)
		}
		nc.Security.SuperUsers = append(nc.Security.SuperUsers, u)
	}
	return nil
}

// loginSettings reads the bootstrap user (sasl.bootstrap.*) and the
// node's own SASL login (sasl.user, sasl.password.file, sasl.mechanism;
// the bootstrap user's by default).
func (nc *NodeConfig) loginSettings() error {
	sec := &nc.Security
	var bootPass string
	bootUser := nc.vals.Get("sasl.bootstrap.user")
	if bootUser != "" || nc.vals.Get("sasl.bootstrap.password.file") != "" {
		if bootUser == "" {
			return nc.bad("sasl.bootstrap.user", "required with sasl.bootstrap.password.file")
		}
		if len(sec.SASLMechanisms) == 0 {
			return nc.bad("sasl.bootstrap.user", "needs sasl.enabled.mechanisms (nobody logs in with SASL otherwise)")
		}
		var err error
		if bootPass, err = nc.readSecret("sasl.bootstrap.password.file"); err != nil {
			return err
		}
		sec.BootstrapUsers = []listener.BootstrapUser{{Name: bootUser, Password: bootPass, Mechanism: sasl.ScramSHA512}}
	}

	user, mech := nc.vals.Get("sasl.user"), strings.ToUpper(nc.vals.Get("sasl.mechanism"))
	var pass string
	switch {
	case user != "":
		var err error
		if pass, err = nc.readSecret("sasl.password.file"); err != nil {
			return err
		}
	case nc.vals.Get("sasl.password.file") != "":
		return nc.bad("sasl.user", "required with sasl.password.file")
	case bootUser != "":
		user, pass, mech = bootUser, bootPass, sasl.ScramSHA512
	}
	if user != "" {
		switch mech {
		case sasl.ScramSHA256:
			nc.SASL = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case sasl.ScramSHA512:
			nc.SASL = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		case sasl.Plain:
			if nc.TLS == nil && nc.ListenerTLS == nil && nc.BrokerListenerTLS == nil {
				return nc.bad("sasl.mechanism", "PLAIN sends the password in the clear: only with TLS (tls.*.file)")
			}
			nc.SASL = plain.Auth{User: user, Pass: pass}.AsMechanism()
		default:
			return nc.bad("sasl.mechanism", "%q is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN", mech)
		}
		if len(sec.SuperUsers) > 0 && !slices.Contains(sec.SuperUsers, "User:"+user) {
			return nc.bad("sasl.user", "%q is not in super.users: voters forward requests and brokers register with this login", user)
		}
	}
	return nil
}

// readSecret reads the first line of the file a setting names.
func (nc *NodeConfig) readSecret(key string) (string, error) {
	path := nc.vals.Get(key)
	if path == "" {
		return "", nc.bad(key, "required")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", nc.bad(key, "%v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) == "" {
		return "", nc.bad(key, "%s has no password on its first line", path)
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
