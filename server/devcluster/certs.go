package devcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Certs are the cluster's certificates: each voter's and broker's,
// loaded, and the admin client's files.
type Certs struct {
	voters  map[int32]*tlsconfig.Reloader
	brokers map[int32]*tlsconfig.Reloader
	// Client is the admin client's certificate (client-admin).
	Client tlsconfig.Files
}

func (d *Certs) voter(id int32) *tlsconfig.Reloader {
	if d == nil {
		return nil
	}
	return d.voters[id]
}

func (d *Certs) broker(id int32) *tlsconfig.Reloader {
	if d == nil {
		return nil
	}
	return d.brokers[id]
}

// PKI is the certificates of a cluster bound to host, in dir: the
// voters', the brokers' and the admin client's, as `ctrlnode certs`
// would make them.
func PKI(dir, host string) tlsconfig.DirPKI {
	hosts := []string{"127.0.0.1", "localhost"}
	if host != "127.0.0.1" {
		hosts = append([]string{host}, hosts...)
	}
	v := tlsconfig.DefaultValidity
	pki := tlsconfig.DirPKI{Dir: dir, Validity: v}
	for i := 0; i < numVoters; i++ {
		pki.Leaves = append(pki.Leaves, tlsconfig.VoterLeaf(int32(firstVoterID+i), hosts, v))
	}
	for i := 0; i < numBrokers; i++ {
		pki.Leaves = append(pki.Leaves, tlsconfig.BrokerLeaf(int32(i+1), hosts, v))
	}
	pki.Leaves = append(pki.Leaves, tlsconfig.ClientLeaf("admin", v))
	return pki
}

// IssueError is a failure to make the certificates.
type IssueError struct {
	Dir string
	Err error
}

func (e *IssueError) Error() string { return fmt.Sprintf("making certificates in %s failed", e.Dir) }
func (e *IssueError) Unwrap() error { return e.Err }

// LoadCerts loads the cluster's certificates from dir, making them first
// (PKI(dir, host), telling report what it writes) when dir holds no CA.
// Each certificate must name its node.
func LoadCerts(dir, host string, logger hclog.Logger, report func(tlsconfig.Written)) (*Certs, error) {
	pki := PKI(dir, host)
	if ca, _ := pki.CAFiles(); !exists(ca) {
		if err := pki.Issue(report); err != nil {
			return nil, &IssueError{Dir: dir, Err: err}
		}
	}
	d := &Certs{voters: map[int32]*tlsconfig.Reloader{}, brokers: map[int32]*tlsconfig.Reloader{}, Client: pki.Files("client-admin")}
	for i := 0; i < numVoters; i++ {
		id := int32(firstVoterID + i)
		r, err := tlsconfig.NewReloader(pki.Files(fmt.Sprintf("voter-%d", id)), tlsconfig.Options{Logger: logger.With("voter", id), Expect: tlsconfig.Voters(id)})
		if err != nil {
			return nil, fmt.Errorf("%w (delete %s to make new certificates)", err, dir)
		}
		d.voters[id] = r
	}
	for i := 0; i < numBrokers; i++ {
		id := int32(i + 1)
		r, err := tlsconfig.NewReloader(pki.Files(fmt.Sprintf("broker-%d", id)), tlsconfig.Options{Logger: logger.With("broker", id), Expect: tlsconfig.Broker(id)})
		if err != nil {
			return nil, fmt.Errorf("%w (delete %s to make new certificates)", err, dir)
		}
		d.brokers[id] = r
	}
	if !exists(d.Client.Cert) || !exists(d.Client.Key) {
		return nil, fmt.Errorf("%s has no admin client certificate (delete the folder to make new certificates)", dir)
	}
	return d, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
