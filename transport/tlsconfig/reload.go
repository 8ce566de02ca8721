package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Files names the PEM files of one node's TLS material.
type Files struct {
	// CA is the bundle of CA certificates that peers' certificates must
	// chain to.
	CA string
	// Cert is this node's certificate, leaf first, then any intermediates.
	Cert string
	// Key is the private key of the leaf certificate.
	Key string
}

// Options configures a Reloader.
type Options struct {
	Logger hclog.Logger
	// Expect, if set, must accept the identity of this node's own
	// certificate at every load: a voter's certificate must keep naming
	// that voter, so a reload cannot swap it for another node's.
	Expect PeerCheck
	// Now is the clock used for expiry checks; nil means time.Now.
	Now func() time.Time
}

// Reloader holds one node's current TLS material and hands out configs
// that use whatever is current at each handshake.
type Reloader struct {
	files Files
	opts  Options
	log   hclog.Logger

	reloadMu sync.Mutex // serialises Reload
	cur      atomic.Pointer[material]
	loads    atomic.Uint64
}

// material is one successful load.
type material struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
	id   Identity
}

// NewReloader loads files; it fails if they do not make a usable
// certificate (see Reload for what is checked).
func NewReloader(files Files, opts Options) (*Reloader, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if files.CA == "" || files.Cert == "" || files.Key == "" {
		return nil, errors.New("tls: a CA bundle, a certificate and a key file are all required")
	}
	r := &Reloader{files: files, opts: opts, log: opts.Logger.Named("tls")}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	r.loads.Add(1)
	r.logLoaded("loaded TLS certificate", m)
	return r, nil
}

// Reload re-reads the files. On success, new handshakes use the new
// material at once; on failure the material loaded before stays in use
// and the reason is logged and returned.
func (r *Reloader) Reload() error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	m, err := r.load()
	if err != nil {
		old := r.cur.Load()
		r.log.Error("TLS reload refused: keeping the certificate loaded before", "error", err,
			"kept_subject", old.leaf.Subject.String(), "kept_not_after", old.leaf.NotAfter.UTC().Format(time.RFC3339))
		return err
	}
	r.cur.Store(m)
	r.loads.Add(1)
	r.logLoaded("reloaded TLS certificate", m)
	return nil
}

func (r *Reloader) logLoaded(msg string, m *material) {
	r.log.Info(msg, "cert", r.files.Cert, "subject", m.leaf.Subject.String(), "identity", m.id.String(),
		"serial", m.leaf.SerialNumber.String(), "not_after", m.leaf.NotAfter.UTC().Format(time.RFC3339), "ca", r.files.CA)
}

// Loads counts successful loads, the first one included.
func (r *Reloader) Loads() uint64 { return r.loads.Load() }

// Identity is the identity this node's current certificate names.
func (r *Reloader) Identity() Identity { return r.cur.Load().id }

// Leaf is this node's current leaf certificate.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().leaf }

// Files are the files the Reloader reads.
func (r *Reloader) Files() Files { return r.files }

func (r *Reloader) load() (*material, error) {
	caPEM, err := os.ReadFile(r.files.CA)
	if err != nil {
		return nil, fmt.Errorf("tls: CA bundle: %w", err)
	}
	pool, n, err := parseCAs(caPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: CA bundle %s: %w", r.files.CA, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("tls: CA bundle %s holds no certificate", r.files.CA)
	}
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s with key %s: %w", r.files.Cert, r.files.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", r.files.Cert, err)
		}
		cert.Leaf = leaf
	}
	now := r.opts.Now()
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("tls: certificate %s expired at %s", r.files.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("tls: certificate %s is not valid before %s", r.files.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s: intermediate: %w", r.files.Cert, err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls: certificate %s does not chain to the CA bundle %s: %w", r.files.Cert, r.files.CA, err)
	}
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s: %w", r.files.Cert, err)
	}
	if r.opts.Expect != nil {
		if err := r.opts.Expect(id); err != nil {
			return nil, fmt.Errorf("tls: certificate %s is not this node's: %w", r.files.Cert, err)
		}
	}
	return &material{cert: &cert, leaf: leaf, pool: pool, id: id}, nil
}

// parseCAs reads every CERTIFICATE block of a PEM bundle; anything else
// in it, or a block that does not parse, is an error.
func parseCAs(data []byte) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, 0, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, 0, err
		}
		pool.AddCert(c)
		n++
	}
	return pool, n, nil
}

// ServerConfig is the config of a listener: it presents this node's
// current certificate, requires a client certificate that chains to the
// current CA bundle, and, when check is not nil, refuses the handshake
// unless check accepts the identity the client's certificate names.
func (r *Reloader) ServerConfig(check PeerCheck) *tls.Config {
	return r.serverConfig(check, tls.RequireAndVerifyClientCert)
}

// ClientListenerConfig is ServerConfig for a listener that also takes
// clients without a certificate, who then authenticate with SASL; a
// certificate that is presented must still chain to the CA.
func (r *Reloader) ClientListenerConfig() *tls.Config {
	return r.serverConfig(nil, tls.VerifyClientCertIfGiven)
}

func (r *Reloader) serverConfig(check PeerCheck, auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			return &tls.Config{
				MinVersion:             tls.VersionTLS12,
				Certificates:           []tls.Certificate{*m.cert},
				ClientCAs:              m.pool,
				ClientAuth:             auth,
				SessionTicketsDisabled: true,
				VerifyConnection:       checkConnection(check),
			}, nil
		},
	}
}

// ClientConfig is the config of a dialler: it presents this node's
// current certificate and verifies the server's chain against the
// current CA bundle. With a check, the server must name an identity the
// check accepts, and its host name is not checked (a raft peer is dialled
// by IP and known by its voter id). Without one, the certificate must be
// valid for serverName (a DNS name or an IP address); an empty serverName
// falls back to the name the client sent in SNI, and with neither every
// handshake fails. serverName is also what is sent in SNI.
func (r *Reloader) ClientConfig(serverName string, check PeerCheck) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// Verification is done below against the CA bundle current at the
		// time of the handshake; the static RootCAs field could not follow
		// a reload.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			m := r.cur.Load()
			leaf := cs.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			opts := x509.VerifyOptions{Roots: m.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if check == nil {
				opts.DNSName = serverName
				if opts.DNSName == "" {
					opts.DNSName = cs.ServerName
				}
				if opts.DNSName == "" {
					return errors.New("tls: no server name to verify the server's certificate against")
				}
			}
			if _, err := leaf.Verify(opts); err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			if check == nil {
				return nil
			}
			return checkConnection(check)(cs)
		},
	}
}

// Dialer returns a dial function (the shape kgo.Dialer and net/http take)
// that connects with nd and completes a TLS handshake with
// ClientConfig(host, check), host being the host part of the address
// dialled. A nil nd is a zero net.Dialer.
func (r *Reloader) Dialer(nd *net.Dialer, check PeerCheck) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if nd == nil {
		nd = &net.Dialer{}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := &tls.Dialer{NetDialer: nd, Config: r.ClientConfig(host, check)}
		return d.DialContext(ctx, network, addr)
	}
}

// checkConnection applies check to the identity of a verified peer.
func checkConnection(check PeerCheck) func(tls.ConnectionState) error {
	if check == nil {
		return nil
	}
	return func(cs tls.ConnectionState) error {
		id, err := PeerIdentity(&cs)
		if err != nil {
			return fmt.Errorf("tls: peer identity: %w", err)
		}
		if err := check(id); err != nil {
			return fmt.Errorf("tls: peer refused: %w", err)
		}
		return nil
	}
}
