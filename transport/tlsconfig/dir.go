package tlsconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultValidity is how long the certificates of a throwaway CA are
// valid unless told otherwise: long enough for a development cluster,
// short enough that nobody mistakes them for a production PKI.
const DefaultValidity = 30 * 24 * time.Hour

// NamedLeaf is a certificate to write into a folder as Name.crt and
// Name.key.
type NamedLeaf struct {
	Name string
	// Identity says whom the certificate is for, in reports ("voter 1001",
	// "client User:admin").
	Identity string
	Leaf
}

// VoterLeaf is voter id's certificate: common name voter-<id>, naming
// VoterURI(id), valid for hosts, for server and client use.
func VoterLeaf(id int32, hosts []string, validity time.Duration) NamedLeaf {
	name := "voter-" + strconv.Itoa(int(id))
	return NamedLeaf{Name: name, Identity: "voter " + strconv.Itoa(int(id)),
		Leaf: Leaf{CommonName: name, URIs: []*url.URL{VoterURI(id)}, Hosts: hosts, Server: true, Client: true, Validity: validity}}
}

// BrokerLeaf is broker id's certificate: common name broker-<id>, naming
// BrokerURI(id), valid for hosts, for server and client use.
func BrokerLeaf(id int32, hosts []string, validity time.Duration) NamedLeaf {
	name := "broker-" + strconv.Itoa(int(id))
	return NamedLeaf{Name: name, Identity: "broker " + strconv.Itoa(int(id)),
		Leaf: Leaf{CommonName: name, URIs: []*url.URL{BrokerURI(id)}, Hosts: hosts, Server: true, Client: true, Validity: validity}}
}

// NodeLeaf is the certificate of a node with both roles, voter and
// broker: common name node-<voter>-<broker>, naming both.
func NodeLeaf(voter, broker int32, hosts []string, validity time.Duration) NamedLeaf {
	name := fmt.Sprintf("node-%d-%d", voter, broker)
	return NamedLeaf{Name: name, Identity: fmt.Sprintf("voter %d and broker %d", voter, broker),
		Leaf: Leaf{CommonName: name, URIs: []*url.URL{VoterURI(voter), BrokerURI(broker)}, Hosts: hosts, Server: true, Client: true, Validity: validity}}
}

// ClientLeaf is a client's certificate, written as client-<name>: common
// name name (the principal User:<name>), no node identity, client use
// only.
func ClientLeaf(name string, validity time.Duration) NamedLeaf {
	return NamedLeaf{Name: "client-" + name, Identity: "client User:" + name,
		Leaf: Leaf{CommonName: name, Client: true, Validity: validity}}
}

// DirPKI is a throwaway PKI kept in a folder: the CA as ca.crt and
// ca.key, each certificate it issued as <name>.crt and <name>.key.
type DirPKI struct {
	Dir string
	// Leaves are the certificates to issue.
	Leaves []NamedLeaf
	// Validity is that of a new CA.
	Validity time.Duration
	// NewCA makes a new CA even if Dir holds one; otherwise a CA in Dir
	// signs the leaves.
	NewCA bool
	// Force replaces files that exist; without it Issue refuses, before
	// writing anything, to replace any.
	Force bool
}

// Written is one certificate Issue wrote, or the CA it used.
type Written struct {
	// CA tells that this is the CA; Reused that it was in Dir already.
	CA, Reused bool
	// Cert and Key are the files.
	Cert, Key string
	// Name and Identity are the NamedLeaf's, empty for the CA.
	Name, Identity string
	NotAfter       time.Time
}

// CAFiles are the paths of the CA's certificate and key in the folder.
func (p DirPKI) CAFiles() (cert, key string) {
	return filepath.Join(p.Dir, "ca.crt"), filepath.Join(p.Dir, "ca.key")
}

// Issue creates Dir if missing, loads the CA there or makes a new one,
// and issues and writes every leaf, telling report (if not nil) about the
// CA and then each leaf as it is written.
func (p DirPKI) Issue(report func(Written)) error {
	if report == nil {
		report = func(Written) {}
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	caCert, caKey := p.CAFiles()
	var existing []string
	reuse := !p.NewCA && exists(caCert) && exists(caKey)
	if !reuse && (exists(caCert) || exists(caKey)) {
		existing = append(existing, caCert, caKey)
	}
	for _, l := range p.Leaves {
		for _, ext := range []string{".crt", ".key"} {
			if path := filepath.Join(p.Dir, l.Name+ext); exists(path) {
				existing = append(existing, path)
			}
		}
	}
	if len(existing) > 0 && !p.Force {
		names := make([]string, len(existing))
		for i, path := range existing {
			names[i] = filepath.Base(path)
		}
		return fmt.Errorf("%s already holds %s; pass --force to replace them", p.Dir, strings.Join(names, ", "))
	}

	var ca *CA
	if reuse {
		cp, err1 := os.ReadFile(caCert)
		kp, err2 := os.ReadFile(caKey)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		var err error
		if ca, err = LoadCA(cp, kp); err != nil {
			return fmt.Errorf("%s: %v (pass --new-ca to make a new one)", p.Dir, err)
		}
	} else {
		var err error
		if ca, err = NewCA("ctrlquorum throwaway CA", p.Validity); err != nil {
			return err
		}
		if err := WriteFileAtomic(caKey, ca.KeyPEM, 0o600); err != nil {
			return err
		}
		if err := WriteFileAtomic(caCert, ca.CertPEM, 0o644); err != nil {
			return err
		}
	}
	report(Written{CA: true, Reused: reuse, Cert: caCert, Key: caKey, NotAfter: ca.Cert.NotAfter})
	for _, l := range p.Leaves {
		is, err := ca.Issue(l.Leaf)
		var f Files
		if err == nil {
			f, err = is.Write(p.Dir, l.Name, caCert)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", l.Name, err)
		}
		report(Written{Cert: f.Cert, Key: f.Key, Name: l.Name, Identity: l.Identity, NotAfter: is.Cert.NotAfter})
	}
	return nil
}

// Files are the files of the certificate written as name, with the CA as
// their bundle.
func (p DirPKI) Files(name string) Files {
	ca, _ := p.CAFiles()
	return Files{CA: ca, Cert: filepath.Join(p.Dir, name+".crt"), Key: filepath.Join(p.Dir, name+".key")}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
