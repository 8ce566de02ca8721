package tlsconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority held in memory: enough to issue the
// certificates of a test or development cluster. Production clusters
// bring their own PKI and only hand this package the resulting files.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the CA's certificate and key, PEM-encoded.
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA (ECDSA P-256) valid for validity from one
// minute ago, so that clocks a little apart accept it at once.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"ctrlquorum"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	CommonName string
	// URIs are the URI SANs: VoterURI(id) and BrokerURI(id) name the
	// node the certificate belongs to.
	URIs []*url.URL
	// Hosts are DNS names or IP addresses the certificate is valid for.
	Hosts []string
	// Server and Client set the extended key usages. A node that both
	// accepts and dials connections needs both.
	Server, Client bool
	Validity       time.Duration
}

// Issued is a certificate and its key, PEM-encoded.
type Issued struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Issue signs a new certificate with a fresh ECDSA P-256 key.
func (ca *CA) Issue(l Leaf) (*Issued, error) {
	if !l.Server && !l.Client {
		return nil, errors.New("tls: a certificate needs server or client use")
	}
	if l.Validity <= 0 {
		return nil, errors.New("tls: validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: []string{"ctrlquorum"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(l.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		URIs:         append([]*url.URL(nil), l.URIs...),
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	for _, h := range l.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// Write writes the certificate to dir/name.crt and its key to
// dir/name.key (mode 0600), and returns the three Files of a node that
// trusts caFile. Each file is written to a temporary name and renamed,
// so a reader never sees half a file.
func (is *Issued) Write(dir, name, caFile string) (Files, error) {
	f := Files{CA: caFile, Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	if err := WriteFileAtomic(f.Key, is.KeyPEM, 0o600); err != nil {
		return Files{}, err
	}
	if err := WriteFileAtomic(f.Cert, is.CertPEM, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// WriteFileAtomic writes data to a temporary file next to path and
// renames it over path.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(name, perm)
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// LoadCA reads a CA written by NewCA (its certificate and PKCS #8 ECDSA
// key, PEM-encoded), to issue more certificates with it.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("tls: CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls: CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("tls: the certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("tls: CA key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls: CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("tls: CA key is a %T, want ECDSA", k)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("tls: the CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
