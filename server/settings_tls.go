package server

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// TLSListener is a listener that may have TLS files of its own,
// Prefix{ca,cert,key}.file, in place of the node-wide tls.*.file ones.
type TLSListener struct {
	Prefix string
	// Label names the listener in run's summary (TLSSet); name names it
	// in messages, what in the help with what else the files serve.
	Label, name, what string
	// Voter tells whether the voter role runs the listener (its
	// certificate then names node.id as voter id); else the broker role
	// does (its certificate names broker.id).
	Voter bool
	// field is the Config field the files fill.
	field string
}

var tlsGroups = []TLSListener{
	{"raft.tls.", "raft", "raft", "raft between voters", true, "RaftTLS"},
	{"listener.tls.", "listener", "the Kafka listener", "the voter's Kafka listener and the voter's Kafka connections (forwarding to the other voters, control requests to brokers)", true, "ListenerTLS"},
	{"broker.listener.tls.", "broker", "the broker agent's listener", "the broker agent's listener and its connections to the controllers", false, "BrokerListenerTLS"},
}

// TLSListeners are the listeners that may have TLS files of their own.
func TLSListeners() []TLSListener { return slices.Clone(tlsGroups) }

// Certs is the listener's own certificate in c, nil if it has none.
func (g TLSListener) Certs(c *Config) *tlsconfig.Reloader {
	return reflect.ValueOf(c).Elem().FieldByName(g.field).Interface().(*tlsconfig.Reloader)
}

func (g TLSListener) runs(c *Config) bool {
	if g.Voter {
		return c.Voter
	}
	return c.Broker
}

func (g TLSListener) role() string {
	if g.Voter {
		return "voter"
	}
	return "broker"
}

func tlsGroupSettings() []Setting {
	var out []Setting
	for _, g := range tlsGroups {
		id := "node.id's voter id"
		if !g.Voter {
			id = "broker.id"
		}
		out = append(out,
			Setting{g.Prefix + "cert.file", "", fmt.Sprintf("PEM certificate for %s in place of tls.cert.file, naming %s; with %skey.file and %sca.file, all three or none; SIGHUP reloads them (empty: the tls.*.file ones)",
				g.what, id, g.Prefix, g.Prefix), g.field, together, nil},
			Setting{g.Prefix + "key.file", "", "PEM private key of " + g.Prefix + "cert.file", "", together, nil},
			Setting{g.Prefix + "ca.file", "", "PEM bundle of the CA certificates the peers of " + g.Prefix + "cert.file must chain to, in place of tls.ca.file", "", together, nil},
		)
	}
	return out
}

// tlsFileSettings reads the node-wide tls.*.file settings and each
// listener's own, refusing a set that is not all three or none.
func (nc *NodeConfig) tlsFileSettings() error {
	read := func(prefix, instead string) (tlsconfig.Files, error) {
		f := tlsconfig.Files{CA: nc.vals.Get(prefix + "ca.file"), Cert: nc.vals.Get(prefix + "cert.file"), Key: nc.vals.Get(prefix + "key.file")}
		if f == (tlsconfig.Files{}) {
			return f, nil
		}
		for _, k := range []string{"ca.file", "cert.file", "key.file"} {
			if nc.vals.Get(prefix+k) == "" {
				return f, nc.bad(prefix+k, "required with the other %s*.file settings (set all three, or none %s)", prefix, instead)
			}
		}
		return f, nil
	}
	var err error
	if nc.TLSFiles, err = read("tls.", "for plain TCP"); err != nil {
		return err
	}
	nc.OwnTLSFiles = map[string]tlsconfig.Files{}
	for _, g := range tlsGroups {
		f, err := read(g.Prefix, "to use the tls.*.file ones")
		if err != nil {
			return err
		}
		if f.Cert != "" {
			nc.OwnTLSFiles[g.Prefix] = f
		}
	}
	return nil
}

// LoadTLS checks which listeners have TLS files and loads them into the
// Config: each listener's own files, and the node-wide ones for the
// listeners without. A certificate must name what its listeners need
// (the voter id, the broker id) at every load, so that a reload cannot
// swap in another node's. logger, if not nil, logs each load and reload.
func (nc *NodeConfig) LoadTLS(logger hclog.Logger) error {
	c := &nc.Config
	wide := nc.TLSFiles.Cert != ""
	var withTLS, plain, own []TLSListener
	for _, g := range tlsGroups {
		_, has := nc.OwnTLSFiles[g.Prefix]
		switch {
		case !g.runs(c):
			if has {
				return nc.bad(g.Prefix+"cert.file", "set, but this node has no %s role", g.role())
			}
			continue
		case has:
			own = append(own, g)
			withTLS = append(withTLS, g)
		case wide:
			withTLS = append(withTLS, g)
		default:
			plain = append(plain, g)
		}
	}
	if len(withTLS) > 0 && len(plain) > 0 {
		// Config.Validate refuses it too (see there why); this names the
		// settings instead of the fields.
		return nc.bad(withTLS[0].Prefix+"cert.file", "%s would run TLS but %s plain TCP, and a node's listeners are all TLS or all plain TCP: set %s*.file too, or tls.*.file for the listeners without files of their own",
			withTLS[0].name, plain[0].name, plain[0].Prefix)
	}
	if wide && len(own) == len(withTLS) {
		var names []string
		for _, g := range own {
			names = append(names, g.Prefix+"*.file")
		}
		return nc.bad("tls.cert.file", "unused: every listener of this node has files of its own (%s)", strings.Join(names, ", "))
	}
	var wideVoter, wideBroker bool
	for _, g := range withTLS {
		f, has := nc.OwnTLSFiles[g.Prefix]
		if !has {
			wideVoter, wideBroker = wideVoter || g.Voter, wideBroker || !g.Voter
			continue
		}
		r, err := newNodeReloader(f, g.Voter, !g.Voter, c, logger)
		if err != nil {
			return nc.bad(g.Prefix+"cert.file", "%v", err)
		}
		nc.field(g.field).Set(reflect.ValueOf(r))
	}
	if wide {
		r, err := newNodeReloader(nc.TLSFiles, wideVoter, wideBroker, c, logger)
		if err != nil {
			return nc.bad("tls.cert.file", "%v", err)
		}
		c.TLS = r
	}
	return nil
}

// TLSSet is the TLS material a listener of the node runs with.
type TLSSet struct {
	Label string
	Files tlsconfig.Files
	Certs *tlsconfig.Reloader
}

// TLSSets lists the listeners the node runs with their TLS material;
// none without TLS.
func (nc *NodeConfig) TLSSets() []TLSSet {
	var out []TLSSet
	for _, g := range tlsGroups {
		if !g.runs(&nc.Config) {
			continue
		}
		if certs := g.Certs(&nc.Config); certs != nil {
			out = append(out, TLSSet{g.Label, nc.OwnTLSFiles[g.Prefix], certs})
		} else if nc.TLS != nil {
			out = append(out, TLSSet{g.Label, nc.TLSFiles, nc.TLS})
		}
	}
	return out
}

// newNodeReloader loads TLS files whose certificate must name the node's
// voter id (voter) and broker id (broker) at every load.
func newNodeReloader(files tlsconfig.Files, voter, broker bool, c *Config, logger hclog.Logger) (*tlsconfig.Reloader, error) {
	nodeID, brokerID := c.NodeID, c.BrokerID
	expect := func(id tlsconfig.Identity) error {
		if voter {
			if err := tlsconfig.Voters(nodeID)(id); err != nil {
				return err
			}
		}
		if broker {
			if err := tlsconfig.Broker(brokerID)(id); err != nil {
				return err
			}
		}
		return nil
	}
	return tlsconfig.NewReloader(files, tlsconfig.Options{Logger: logger, Expect: expect})
}
