package raftnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The directory handshake. A dialer whose target address names a
// directory id (PeerAddress.DirectoryID) opens the connection with
//
//	identityMagic, identityVersion, len(dir), dir
//
// and waits for one byte, identityAccepted or identityRefused, followed by
// len(own dir) and the acceptor's own directory id. Raft's own traffic
// starts with an RPC type byte below 16, so an acceptor tells a handshake
// from a legacy dialer (an address without a directory id, or a release
// that had none) by the first byte, and passes a legacy connection to raft
// with that byte intact. A connection to a legacy address sends nothing
// more than before, so voters of an older release still understand it.
const (
	identityMagic    byte = 0xC7
	identityVersion  byte = 1
	identityAccepted byte = 0
	identityRefused  byte = 1
	// identityTimeout bounds the handshake when the dial carries no
	// deadline, and always the acceptor's read of it.
	identityTimeout = 10 * time.Second
	maxDirectoryID  = 64
)

// ErrDirectoryMismatch is the error of a dial whose peer answered that it
// is another directory than the one its address names: the node there was
// formatted again (a lost disk) and is not the voter the address names.
var ErrDirectoryMismatch = errors.New("raft peer is another directory than its voter's")

// SetIdentity names the node this stream layer serves: its node id and
// its directory id, which an inbound connection dialled for another
// directory is refused for. Refusals are logged at WARN on logger (nil:
// none). Call it before raft starts; an empty dirID accepts every
// connection, as before directory ids existed.
func (s *StreamLayer) SetIdentity(nodeID, dirID string, logger hclog.Logger) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s.mu.Lock()
	s.nodeID, s.dirID, s.log = nodeID, dirID, logger
	s.mu.Unlock()
}

// refusalLogEvery is how often a refusal of the same directory is
// logged at WARN; the repeats in between, as raft retries, are DEBUG.
const refusalLogEvery = 30 * time.Second

// warnOrDebug returns logger's Warn for the first refusal of its key in
// refusalLogEvery, its Debug for the others.
func (s *StreamLayer) warnOrDebug(logger hclog.Logger, key string) func(string, ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if last, ok := s.warned[key]; ok && now.Sub(last) < refusalLogEvery {
		return logger.Debug
	}
	if s.warned == nil {
		s.warned = map[string]time.Time{}
	}
	s.warned[key] = now
	return logger.Warn
}

func (s *StreamLayer) identity() (nodeID, dirID string, logger hclog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return s.nodeID, s.dirID, hclog.NewNullLogger()
	}
	return s.nodeID, s.dirID, s.log
}

// confirmDirectory runs the dialer's side of the handshake on c.
func (s *StreamLayer) confirmDirectory(c net.Conn, addr PeerAddress, deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(identityTimeout)
	}
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	msg := append([]byte{identityMagic, identityVersion, byte(len(addr.DirectoryID))}, addr.DirectoryID...)
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("raft directory handshake with %s: %w", addr.HostPort, err)
	}
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return fmt.Errorf("raft directory handshake with %s: %w", addr.HostPort, err)
	}
	theirs := make([]byte, head[1])
	if _, err := io.ReadFull(c, theirs); err != nil {
		return fmt.Errorf("raft directory handshake with %s: %w", addr.HostPort, err)
	}
	if head[0] != identityAccepted {
		nodeID, _, logger := s.identity()
		s.warnOrDebug(logger, "dial/"+addr.HostPort+"/"+string(theirs))(
			"a raft peer refused the connection: the node at its address is another copy of that voter (formatted again after a lost disk?): remove the old voter and add the node as a new one",
			"peer", addr.HostPort, "expected_directory", addr.DirectoryID, "peer_directory", string(theirs), "self", nodeID)
		return fmt.Errorf("%w: %s is directory %q, the voter's is %q", ErrDirectoryMismatch, addr.HostPort, theirs, addr.DirectoryID)
	}
	return c.SetDeadline(time.Time{})
}

// Read, on an accepted connection, first tells a directory handshake from
// raft's own traffic and answers it (check). It runs in raft's goroutine
// for the connection, not in the accept loop, so a peer that connects and
// says nothing holds only its own connection.
func (c *trackedConn) Read(p []byte) (int, error) {
	if !c.inbound {
		return c.Conn.Read(p)
	}
	c.checkOnce.Do(c.check)
	if c.checkErr != nil {
		return 0, c.checkErr
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *trackedConn) check() {
	var first [1]byte
	if _, err := io.ReadFull(c.Conn, first[:]); err != nil {
		c.checkErr = err
		return
	}
	if first[0] != identityMagic {
		c.pending = first[:]
		return
	}
	nodeID, own, logger := c.owner.identity()
	_ = c.Conn.SetReadDeadline(time.Now().Add(identityTimeout))
	var head [2]byte
	if _, err := io.ReadFull(c.Conn, head[:]); err != nil {
		c.refuse(err)
		return
	}
	want := make([]byte, head[1])
	if _, err := io.ReadFull(c.Conn, want); err != nil {
		c.refuse(err)
		return
	}
	if head[0] != identityVersion || len(want) > maxDirectoryID {
		c.refuse(fmt.Errorf("raft directory handshake version %d from %s is not %d", head[0], c.RemoteAddr(), identityVersion))
		return
	}
	_ = c.Conn.SetReadDeadline(time.Time{})
	reply := []byte{identityAccepted, byte(len(own))}
	// A node without a directory id cannot tell; it accepts, as before.
	if own != "" && !bytes.Equal(want, []byte(own)) {
		reply[0] = identityRefused
		c.owner.warnOrDebug(logger, "accept/"+string(want))(
			fmt.Sprintf("refused a raft connection meant for another directory: this node's directory is %s, and the quorum knows node %s as directory %s: this node was formatted again (a lost disk?) and is not that voter. Replace it: ctrlnode quorum remove-voter --id %s --directory-id %s, then ctrlnode quorum add-voter --id %s --directory-id %s with this node's raft and listener addresses",
				own, nodeID, want, nodeID, want, nodeID, own),
			"self", nodeID, "this_directory", own, "expected_directory", string(want), "remote", c.RemoteAddr().String())
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(identityTimeout))
	_, err := c.Conn.Write(append(reply, own...))
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if reply[0] == identityRefused {
		c.refuse(nil)
		return
	}
	if err != nil {
		c.refuse(err)
	}
}

// refuse closes the connection; raft's read then ends as at a closed
// connection (io.EOF), which it does not log as an error.
func (c *trackedConn) refuse(err error) {
	_ = c.Close()
	c.checkErr = io.EOF
	if err != nil && !errors.Is(err, io.EOF) {
		_, _, logger := c.owner.identity()
		logger.Debug("raft directory handshake failed", "remote", c.RemoteAddr().String(), "error", err)
	}
}
