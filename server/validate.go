package server

import (
	"fmt"
	"net"
	"time"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// FieldError is a Config field with an invalid value. Field is the Go
// field name (Config.Voters[1].Raft is "Voters[1].Raft").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// checkAddr checks a host:port; wantPort requires a non-zero port.
func checkAddr(field, addr string, wantPort bool) error {
	if addr == "" {
		return fieldErr(field, "required (host:port)")
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return fieldErr(field, "%q is not host:port: %v", addr, err)
	}
	if wantPort && port == 0 {
		return fieldErr(field, "%q needs a port other than 0", addr)
	}
	if host != "" && net.ParseIP(host) == nil {
		if _, err := net.LookupHost(host); err != nil {
			return fieldErr(field, "host %q does not resolve: %v", host, err)
		}
	}
	return nil
}

// minSnapshotInterval is the shortest snapshot interval raft takes
// (raft.ValidateConfig).
const minSnapshotInterval = 5 * time.Millisecond

// Validate reports the first invalid field, as a *FieldError.
func (c *Config) Validate() error {
	if !c.Voter && !c.Broker {
		return fieldErr("Roles", "a node needs the voter role, the broker role, or both")
	}
	if c.NodeID < 0 {
		return fieldErr("NodeID", "%d is negative", c.NodeID)
	}
	if c.SessionTimeout < 0 {
		return fieldErr("SessionTimeout", "%v is negative", c.SessionTimeout)
	}
	if c.SessionTimeout > 0 && c.SessionTimeout < 100*time.Millisecond {
		return fieldErr("SessionTimeout", "%v is below 100ms", c.SessionTimeout)
	}
	voterIDs := map[int32]bool{}
	for i, v := range c.Voters {
		f := fmt.Sprintf("Voters[%d]", i)
		if v.ID < 0 {
			return fieldErr(f+".ID", "%d is negative", v.ID)
		}
		if voterIDs[v.ID] {
			return fieldErr(f+".ID", "voter %d is listed twice", v.ID)
		}
		voterIDs[v.ID] = true
		if err := checkAddr(f+".Raft", v.Raft, true); err != nil {
			return err
		}
		if err := checkAddr(f+".Listener", v.Listener, true); err != nil {
			return err
		}
	}
	if c.Voter {
		if len(c.Voters) == 0 {
			return fieldErr("Voters", "required for a voter: every voter's id, raft and listener address")
		}
		if !voterIDs[c.NodeID] {
			return fieldErr("Voters", "does not list this node (%d)", c.NodeID)
		}
		if err := checkAddr("RaftAddr", c.RaftAddr, false); err != nil {
			return err
		}
		if c.RaftAdvertise != "" {
			if err := checkAddr("RaftAdvertise", c.RaftAdvertise, true); err != nil {
				return err
			}
		}
		if err := checkAddr("Listener", c.Listener, false); err != nil {
			return err
		}
		if c.ListenerAdvertise != "" {
			if err := checkAddr("ListenerAdvertise", c.ListenerAdvertise, true); err != nil {
				return err
			}
		}
		if c.DataDir == "" {
			return fieldErr("DataDir", "required for a voter")
		}
		for i, v := range c.Voters {
			if v.ID != c.NodeID {
				continue
			}
			adv := c.RaftAdvertise
			if adv == "" {
				adv = c.RaftAddr
			}
			if v.Raft != adv {
				return fieldErr(fmt.Sprintf("Voters[%d].Raft", i), "lists this node at %s but its raft address is %s", v.Raft, adv)
			}
		}
	}
	if c.Broker {
		if c.BrokerID < 0 {
			return fieldErr("BrokerID", "%d is negative", c.BrokerID)
		}
		if voterIDs[c.BrokerID] {
			return fieldErr("BrokerID", "%d is also a voter id: broker ids and voter ids must not collide", c.BrokerID)
		}
		if err := checkAddr("BrokerListener", c.BrokerListener, false); err != nil {
			return err
		}
		if c.BrokerAdvertise != "" {
			if err := checkAddr("BrokerAdvertise", c.BrokerAdvertise, true); err != nil {
				return err
			}
		}
		if len(c.Controllers) == 0 && len(c.Voters) == 0 {
			return fieldErr("Controllers", "required for a broker: the controllers' listener addresses")
		}
		for i, a := range c.Controllers {
			if err := checkAddr(fmt.Sprintf("Controllers[%d]", i), a, true); err != nil {
				return err
			}
		}
		if c.HeartbeatInterval < 0 {
			return fieldErr("HeartbeatInterval", "%v is negative", c.HeartbeatInterval)
		}
		st := c.SessionTimeout
		if st == 0 {
			st = 9 * time.Second
		}
		if c.HeartbeatInterval >= st {
			return fieldErr("HeartbeatInterval", "%v is not below the session timeout %v", c.HeartbeatInterval, st)
		}
	}
	for _, l := range []struct {
		field  string
		limits WireLimits
	}{{"ListenerLimits", c.ListenerLimits}, {"BrokerListenerLimits", c.BrokerListenerLimits}} {
		if err := l.limits.validate(l.field); err != nil {
			return err
		}
	}
	if c.RaftHandshakeTimeout < 0 {
		return fieldErr("RaftHandshakeTimeout", "%v is negative", c.RaftHandshakeTimeout)
	}
	if c.RaftMaxHandshakes < 0 {
		return fieldErr("RaftMaxHandshakes", "%d is negative", c.RaftMaxHandshakes)
	}
	if c.RaftSnapshotInterval < 0 {
		return fieldErr("RaftSnapshotInterval", "%v is negative", c.RaftSnapshotInterval)
	}
	if c.RaftSnapshotInterval > 0 && c.RaftSnapshotInterval < minSnapshotInterval {
		return fieldErr("RaftSnapshotInterval", "%v is below %v, raft's minimum", c.RaftSnapshotInterval, minSnapshotInterval)
	}
	if _, err := raftlog.ParseLogStore(string(c.RaftLogStore)); err != nil {
		return fieldErr("RaftLogStore", "%v", err)
	}
	if c.HTTPAddr != "" {
		if err := checkAddr("HTTPAddr", c.HTTPAddr, false); err != nil {
			return err
		}
	}
	return c.validateTLS()
}

// validateTLS checks that each listener's certificate names the node as
// that listener needs, and that no listener is left on plain TCP while
// another runs TLS.
func (c *Config) validateTLS() error {
	if !c.Voter && c.RaftTLS != nil {
		return fieldErr("RaftTLS", "set without the voter role")
	}
	if !c.Voter && c.ListenerTLS != nil {
		return fieldErr("ListenerTLS", "set without the voter role")
	}
	if !c.Broker && c.BrokerListenerTLS != nil {
		return fieldErr("BrokerListenerTLS", "set without the broker role")
	}
	uses := c.tlsUses()
	// Mixed listeners are refused rather than supported: a listener's
	// material also serves what the node dials beside it (the broker
	// agent dials the controllers with its listener's, the voter dials
	// brokers with its Kafka listener's), so a plain listener beside TLS
	// ones would have the node dial TLS peers in plain TCP, or plain ones
	// in TLS. Raft alone on TLS would work, but is not worth an exception
	// that leaves the Kafka listeners open.
	for _, u := range uses {
		for _, v := range uses {
			if u.certs != nil && v.certs == nil {
				return fieldErr(u.field, "%s runs TLS but %s would be plain TCP: a node's listeners are all TLS or all plain TCP", u.what, v.what)
			}
		}
	}
	for _, u := range uses {
		if u.certs == nil {
			continue
		}
		id := u.certs.Identity()
		if u.voter && id.Voter != c.NodeID {
			return fieldErr(u.field, "the certificate %s does not name voter %d (NodeID)", id, c.NodeID)
		}
		if !u.voter && id.Broker != c.BrokerID {
			return fieldErr(u.field, "the certificate %s does not name broker %d (BrokerID)", id, c.BrokerID)
		}
	}
	return nil
}
