// Package tlstest makes throwaway certificate authorities and node
// certificates on disk for tests: each PKI lives in its own temporary
// folder and is removed with the test.
package tlstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// PKI is a CA with its certificate written to CAFile.
type PKI struct {
	t      testing.TB
	Dir    string
	CA     *tlsconfig.CA
	CAFile string
}

// NewPKI makes a CA valid for an hour in a temporary folder.
func NewPKI(t testing.TB, name string) *PKI {
	t.Helper()
	ca, err := tlsconfig.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &PKI{t: t, Dir: dir, CA: ca, CAFile: filepath.Join(dir, "ca.crt")}
	if err := tlsconfig.WriteFileAtomic(p.CAFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue writes a certificate for name with the given URI SANs, valid for
// 127.0.0.1 and localhost, for both server and client use, to
// Dir/name.crt and Dir/name.key (replacing earlier ones), and returns its
// files.
func (p *PKI) Issue(name string, uris ...*url.URL) tlsconfig.Files {
	p.t.Helper()
	return p.write(tlsconfig.NamedLeaf{Name: name, Leaf: tlsconfig.Leaf{CommonName: name, URIs: uris, Hosts: hosts,
		Server: true, Client: true, Validity: time.Hour}})
}

var hosts = []string{"127.0.0.1", "localhost"}

func (p *PKI) write(l tlsconfig.NamedLeaf) tlsconfig.Files {
	p.t.Helper()
	is, err := p.CA.Issue(l.Leaf)
	if err != nil {
		p.t.Fatal(err)
	}
	f, err := is.Write(p.Dir, l.Name, p.CAFile)
	if err != nil {
		p.t.Fatal(err)
	}
	return f
}

// Voter issues voter id's certificate (CN voter-<id>, as
// tlsconfig.VoterLeaf names it).
func (p *PKI) Voter(id int32) tlsconfig.Files {
	p.t.Helper()
	return p.write(tlsconfig.VoterLeaf(id, hosts, time.Hour))
}

// Broker issues broker id's certificate (CN broker-<id>, as
// tlsconfig.BrokerLeaf names it).
func (p *PKI) Broker(id int32) tlsconfig.Files {
	p.t.Helper()
	return p.write(tlsconfig.BrokerLeaf(id, hosts, time.Hour))
}

// Client issues a certificate that names no node.
func (p *PKI) Client(name string) tlsconfig.Files {
	p.t.Helper()
	return p.Issue(name)
}

// Reloader loads files, failing the test if they do not load.
func (p *PKI) Reloader(f tlsconfig.Files) *tlsconfig.Reloader {
	p.t.Helper()
	r, err := tlsconfig.NewReloader(f, tlsconfig.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

// Presented opens a new TLS connection to addr with cfg and returns the
// certificate the server presented.
func Presented(t testing.TB, addr string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("new TLS connection to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
}
