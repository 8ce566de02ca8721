package main

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// tlsGroup is a listener that may have TLS files of its own,
// prefix{ca,cert,key}.file, in place of the node-wide tls.*.file ones.
type tlsGroup struct {
	prefix string
	// label names the listener in run's summary, name in messages, what
	// in the help with what else the files serve.
	label, name, what string
	// voter tells whether the voter role runs the listener (its
	// certificate then names node.id as voter id); else the broker role
	// does (its certificate names broker.id).
	voter bool
	// field is the server.Config field the files fill.
	field string
	certs func(*server.Config) **tlsconfig.Reloader
}

var tlsGroups = []tlsGroup{
	{"raft.tls.", "raft", "raft", "raft between voters", true, "RaftTLS",
		func(c *server.Config) **tlsconfig.Reloader { return &c.RaftTLS }},
	{"listener.tls.", "listener", "the Kafka listener", "the voter's Kafka listener and the voter's Kafka connections (forwarding to the other voters, control requests to brokers)", true, "ListenerTLS",
		func(c *server.Config) **tlsconfig.Reloader { return &c.ListenerTLS }},
	{"broker.listener.tls.", "broker", "the broker agent's listener", "the broker agent's listener and its connections to the controllers", false, "BrokerListenerTLS",
		func(c *server.Config) **tlsconfig.Reloader { return &c.BrokerListenerTLS }},
}

func (g tlsGroup) runs(c *server.Config) bool {
	if g.voter {
		return c.Voter
	}
	return c.Broker
}

func (g tlsGroup) role() string {
	if g.voter {
		return "voter"
	}
	return "broker"
}

func tlsGroupSettings() []setting {
	var out []setting
	for _, g := range tlsGroups {
		id := "node.id's voter id"
		if !g.voter {
			id = "broker.id"
		}
		out = append(out,
			setting{g.prefix + "cert.file", "", fmt.Sprintf("PEM certificate for %s in place of tls.cert.file, naming %s; with %skey.file and %sca.file, all three or none; SIGHUP reloads them (empty: the tls.*.file ones)",
				g.what, id, g.prefix, g.prefix), g.field},
			setting{g.prefix + "key.file", "", "PEM private key of " + g.prefix + "cert.file", ""},
			setting{g.prefix + "ca.file", "", "PEM bundle of the CA certificates the peers of " + g.prefix + "cert.file must chain to, in place of tls.ca.file", ""},
		)
	}
	return out
}

// tlsFileSettings reads the node-wide tls.*.file settings and each
// listener's own, refusing a set that is not all three or none.
func tlsFileSettings(ns nodeSettings, nc *nodeConfig) error {
	read := func(prefix, instead string) (tlsconfig.Files, error) {
		f := tlsconfig.Files{CA: ns.get(prefix + "ca.file"), Cert: ns.get(prefix + "cert.file"), Key: ns.get(prefix + "key.file")}
		if f == (tlsconfig.Files{}) {
			return f, nil
		}
		for _, k := range []string{"ca.file", "cert.file", "key.file"} {
			if ns.get(prefix+k) == "" {
				return f, cfgErr("%s: required with the other %s*.file settings (set all three, or none %s)", ns.describe(prefix+k), prefix, instead)
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
		f, err := read(g.prefix, "to use the tls.*.file ones")
		if err != nil {
			return err
		}
		if f.Cert != "" {
			nc.OwnTLSFiles[g.prefix] = f
		}
	}
	return nil
}

// loadTLS checks which listeners have TLS files and loads them into the
// server.Config: each listener's own files, and the node-wide ones for
// the listeners without. A certificate must name what its listeners need
// (the voter id, the broker id) at every load, so that a reload cannot
// swap in another node's. logger, if not nil, logs each load and reload.
func loadTLS(ns nodeSettings, nc *nodeConfig, logger hclog.Logger) error {
	c := &nc.Config
	bad := func(key, format string, args ...any) error {
		return cfgErr("%s: %s", ns.describe(key), fmt.Sprintf(format, args...))
	}
	wide := nc.TLSFiles.Cert != ""
	var withTLS, plain, own []tlsGroup
	for _, g := range tlsGroups {
		_, has := nc.OwnTLSFiles[g.prefix]
		switch {
		case !g.runs(c):
			if has {
				return bad(g.prefix+"cert.file", "set, but this node has no %s role", g.role())
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
		// server.Config.Validate refuses it too (see there why); this
		// names the settings instead of the fields.
		return bad(withTLS[0].prefix+"cert.file", "%s would run TLS but %s plain TCP, and a node's listeners are all TLS or all plain TCP: set %s*.file too, or tls.*.file for the listeners without files of their own",
			withTLS[0].name, plain[0].name, plain[0].prefix)
	}
	if wide && len(own) == len(withTLS) {
		var names []string
		for _, g := range own {
			names = append(names, g.prefix+"*.file")
		}
		return bad("tls.cert.file", "unused: every listener of this node has files of its own (%s)", strings.Join(names, ", "))
	}
	var wideVoter, wideBroker bool
	for _, g := range withTLS {
		f, has := nc.OwnTLSFiles[g.prefix]
		if !has {
			wideVoter, wideBroker = wideVoter || g.voter, wideBroker || !g.voter
			continue
		}
		r, err := newNodeReloader(f, g.voter, !g.voter, c, logger)
		if err != nil {
			return bad(g.prefix+"cert.file", "%v", err)
		}
		*g.certs(c) = r
	}
	if wide {
		r, err := newNodeReloader(nc.TLSFiles, wideVoter, wideBroker, c, logger)
		if err != nil {
			return bad("tls.cert.file", "%v", err)
		}
		c.TLS = r
	}
	return nil
}

// tlsSet is the TLS material a listener of the node runs with.
type tlsSet struct {
	label string
	files tlsconfig.Files
	certs *tlsconfig.Reloader
}

// tlsSets lists the listeners the node runs with their TLS material;
// none without TLS.
func (nc *nodeConfig) tlsSets() []tlsSet {
	var out []tlsSet
	for _, g := range tlsGroups {
		if !g.runs(&nc.Config) {
			continue
		}
		if certs := *g.certs(&nc.Config); certs != nil {
			out = append(out, tlsSet{g.label, nc.OwnTLSFiles[g.prefix], certs})
		} else if nc.TLS != nil {
			out = append(out, tlsSet{g.label, nc.TLSFiles, nc.TLS})
		}
	}
	return out
}

// newNodeReloader loads TLS files whose certificate must name the node's
// voter id (voter) and broker id (broker) at every load.
func newNodeReloader(files tlsconfig.Files, voter, broker bool, c *server.Config, logger hclog.Logger) (*tlsconfig.Reloader, error) {
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
