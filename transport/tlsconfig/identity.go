package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Scheme is the URI scheme of the identity names a certificate carries.
const Scheme = "ctrlquorum"

// Roles a certificate can name.
const (
	RoleVoter  = "voter"
	RoleBroker = "broker"
)

// Identity is what a certificate says about its holder.
type Identity struct {
	// Voter is the controller voter id the certificate names, -1 if none.
	Voter int32
	// Broker is the data broker id the certificate names, -1 if none.
	Broker int32
	// Name is the subject common name.
	Name string
}

// NoIdentity names nothing.
var NoIdentity = Identity{Voter: -1, Broker: -1}

// IsVoter reports whether the identity names a voter.
func (id Identity) IsVoter() bool { return id.Voter >= 0 }

// IsBroker reports whether the identity names a broker.
func (id Identity) IsBroker() bool { return id.Broker >= 0 }

// Principal is the Kafka-style principal of the certificate's holder:
// "User:" followed by the subject common name.
func (id Identity) Principal() string { return "User:" + id.Name }

func (id Identity) String() string {
	s := strconv.Quote(id.Name)
	if id.IsVoter() {
		s += " voter " + strconv.Itoa(int(id.Voter))
	}
	if id.IsBroker() {
		s += " broker " + strconv.Itoa(int(id.Broker))
	}
	return s
}

// VoterURI is the URI SAN that names voter id.
func VoterURI(id int32) *url.URL {
	return &url.URL{Scheme: Scheme, Host: RoleVoter, Path: "/" + strconv.Itoa(int(id))}
}

// BrokerURI is the URI SAN that names broker id.
func BrokerURI(id int32) *url.URL {
	return &url.URL{Scheme: Scheme, Host: RoleBroker, Path: "/" + strconv.Itoa(int(id))}
}

// IdentityOf reads the identity a certificate names (see the package
// comment). A certificate without ctrlquorum URIs names no voter and no
// broker; one with a ctrlquorum URI that does not parse, or with
// conflicting ids, is an error.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	if cert == nil {
		return NoIdentity, errors.New("no certificate")
	}
	id := NoIdentity
	id.Name = cert.Subject.CommonName
	for _, u := range cert.URIs {
		if u.Scheme != Scheme {
			continue
		}
		role, n, err := parseIdentityURI(u)
		if err != nil {
			return NoIdentity, err
		}
		slot := &id.Voter
		if role == RoleBroker {
			slot = &id.Broker
		}
		if *slot >= 0 && *slot != n {
			return NoIdentity, fmt.Errorf("certificate names two %s ids, %d and %d", role, *slot, n)
		}
		*slot = n
	}
	return id, nil
}

func parseIdentityURI(u *url.URL) (string, int32, error) {
	bad := func(why string) (string, int32, error) {
		return "", -1, fmt.Errorf("identity URI %q: %s (want %s://voter/<id> or %s://broker/<id>)", u.String(), why, Scheme, Scheme)
	}
	if u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return bad("unexpected parts")
	}
	if u.Host != RoleVoter && u.Host != RoleBroker {
		return bad("unknown role")
	}
	if len(u.Path) < 2 || u.Path[0] != '/' {
		return bad("no id")
	}
	digits := u.Path[1:]
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != digits {
		return bad("id is not a non-negative decimal int32")
	}
	return u.Host, int32(n), nil
}

// PeerIdentity reads the identity of the peer's leaf certificate in a
// completed handshake. It fails when the peer sent no certificate.
func PeerIdentity(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return NoIdentity, errors.New("peer sent no certificate")
	}
	return IdentityOf(cs.PeerCertificates[0])
}

// PeerCheck decides whether a peer whose certificate names id may take
// part in a connection. The chain has been verified before it is called.
type PeerCheck func(id Identity) error

// Voters accepts a certificate that names one of ids as its voter id.
func Voters(ids ...int32) PeerCheck {
	set := make(map[int32]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return VoterFunc(func(id int32) bool { return set[id] })
}

// VoterFunc accepts a certificate whose voter id ok accepts: for a voter
// set that changes while the node runs.
func VoterFunc(ok func(id int32) bool) PeerCheck {
	return func(id Identity) error {
		if !id.IsVoter() {
			return fmt.Errorf("certificate %s names no voter id", id)
		}
		if !ok(id.Voter) {
			return fmt.Errorf("certificate names voter %d, which is not a configured voter", id.Voter)
		}
		return nil
	}
}

// Broker accepts a certificate that names broker id.
func Broker(id int32) PeerCheck {
	return func(got Identity) error {
		if !got.IsBroker() {
			return fmt.Errorf("certificate %s names no broker id, want broker %d", got, id)
		}
		if got.Broker != id {
			return fmt.Errorf("certificate names broker %d, want broker %d", got.Broker, id)
		}
		return nil
	}
}

// AnyBroker accepts a certificate that names some broker id.
func AnyBroker() PeerCheck {
	return func(got Identity) error {
		if !got.IsBroker() {
			return fmt.Errorf("certificate %s names no broker id", got)
		}
		return nil
	}
}

// UnverifiedPeer returns, as log fields, what the certificate a peer
// presented in a failed handshake says about its holder when the failure
// is that the certificate did not verify (another CA, expired): its
// subject, issuer and URI SANs. None of it is proven, as the field names
// say, but a refusal logged without it would not tell an operator that a
// stranger claimed to be, say, voter 1001. For any other error it returns
// nil.
func UnverifiedPeer(err error) []any {
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) || len(cve.UnverifiedCertificates) == 0 {
		return nil
	}
	leaf := cve.UnverifiedCertificates[0]
	uris := make([]string, len(leaf.URIs))
	for i, u := range leaf.URIs {
		uris[i] = u.String()
	}
	return []any{"unverified_subject", leaf.Subject.String(), "unverified_issuer", leaf.Issuer.String(),
		"unverified_uris", strings.Join(uris, ",")}
}
