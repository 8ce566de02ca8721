package raftnet

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

func TestPeerAddressRoundTrip(t *testing.T) {
	for _, a := range []PeerAddress{
		{HostPort: "127.0.0.1:9093"},
		{HostPort: "127.0.0.1:9093", DirectoryID: "Xl9rEOEoRkSAi3lxfHTvIQ"},
		{HostPort: "[::1]:9093", DirectoryID: "Xl9rEOEoRkSAi3lxfHTvIQ", Listener: "[::1]:9092"},
		{HostPort: "host.example:9093", Listener: "host.example:9092"},
	} {
		got, err := ParsePeerAddress(a.String())
		if err != nil || got != a {
			t.Errorf("ParsePeerAddress(%q) = %+v, %v; want %+v", a.String(), got, err, a)
		}
	}
	if a := (PeerAddress{HostPort: "10.0.0.1:9093"}); a.String() != "10.0.0.1:9093" || !a.Legacy() {
		t.Errorf("a legacy address is written as %q (legacy %v), want the host:port alone", a.String(), a.Legacy())
	}
	for _, bad := range []string{"", "nohost", "h:1?dir=", "h:1?dir=a&dir=b", "h:1?color=red", "h:1?listener=x", "h:1?dir"} {
		if _, err := ParsePeerAddress(bad); err == nil {
			t.Errorf("ParsePeerAddress(%q) accepted", bad)
		}
	}
}

type accepted struct {
	c    net.Conn
	data []byte
	err  error
}

// acceptAndRead accepts one connection on s and reads n bytes from it, as
// raft's transport reads a command at once.
func acceptAndRead(s *StreamLayer, n int) <-chan accepted {
	out := make(chan accepted, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			out <- accepted{err: err}
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
		buf := make([]byte, n)
		_, err = io.ReadFull(c, buf)
		out <- accepted{c: c, data: buf, err: err}
	}()
	return out
}

func identityLayer(t *testing.T, l *StreamLayer, node, dir string) *testkit.Log {
	t.Helper()
	logs := &testkit.Log{}
	l.SetIdentity(node, dir, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}))
	return logs
}

func dialAddr(to *StreamLayer, dir string) raft.ServerAddress {
	return raft.ServerAddress(PeerAddress{HostPort: to.Addr().String(), DirectoryID: dir}.String())
}

// TestDirectoryHandshake: a dial to an address naming the peer's own
// directory, or to a legacy address, carries raft's bytes unchanged; a
// dial naming another directory is refused on both sides, and the
// refused node's log says what to do.
func TestDirectoryHandshake(t *testing.T) {
	dialer := newLayer(t, "127.0.0.1:0")
	identityLayer(t, dialer, "1001", "dialerDirectoryAAAAAAA")
	target := newLayer(t, "127.0.0.1:0")
	logs := identityLayer(t, target, "1002", "currentDirectoryBBBBBB")

	for _, dir := range []string{"currentDirectoryBBBBBB", ""} {
		acc := acceptAndRead(target, 4)
		c, err := dialer.Dial(dialAddr(target, dir), ioTimeout)
		if err != nil {
			t.Fatalf("dial for directory %q: %v", dir, err)
		}
		if _, err := c.Write([]byte{0, 'a', 'b', 'c'}); err != nil {
			t.Fatal(err)
		}
		a := <-acc
		if a.err != nil || string(a.data) != "\x00abc" {
			t.Fatalf("directory %q: accepted side read %q, %v; want raft's bytes unchanged", dir, a.data, a.err)
		}
		c.Close()
		a.c.Close()
	}

	acc := acceptAndRead(target, 1)
	_, err := dialer.Dial(dialAddr(target, "replacedDirectoryCCCCC"), ioTimeout)
	if !errors.Is(err, ErrDirectoryMismatch) {
		t.Fatalf("dial for a replaced directory: %v, want ErrDirectoryMismatch", err)
	}
	if a := <-acc; !errors.Is(a.err, io.EOF) {
		t.Fatalf("the refused connection reads %q, %v on the accepting side; want io.EOF", a.data, a.err)
	}
	out := logs.String()
	for _, want := range []string{"[WARN]", "refused a raft connection meant for another directory",
		"this_directory=currentDirectoryBBBBBB", "expected_directory=replacedDirectoryCCCCC", "remove-voter"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused node's log lacks %q:\n%s", want, out)
		}
	}

	if !strings.Contains(out, "remove-voter --id 1002 --directory-id replacedDirectoryCCCCC") {
		t.Errorf("the refusal does not give the command to run:\n%s", out)
	}
	// Raft retries; the repeats are not logged at WARN again.
	acc = acceptAndRead(target, 1)
	if _, err := dialer.Dial(dialAddr(target, "replacedDirectoryCCCCC"), ioTimeout); !errors.Is(err, ErrDirectoryMismatch) {
		t.Fatalf("second dial for a replaced directory: %v", err)
	}
	<-acc
	if n := strings.Count(logs.String(), "[WARN]"); n != 1 {
		t.Errorf("%d WARN lines after two refusals, want 1:\n%s", n, logs.String())
	}

	// A node without a directory id cannot tell and accepts.
	anon := newLayer(t, "127.0.0.1:0")
	acc = acceptAndRead(anon, 1)
	c, err := dialer.Dial(dialAddr(anon, "anyDirectoryDDDDDDDDDD"), ioTimeout)
	if err != nil {
		t.Fatalf("dial a node without identity: %v", err)
	}
	c.Write([]byte{1})
	if a := <-acc; a.err != nil || a.data[0] != 1 {
		t.Fatalf("a node without identity read %v, %v", a.data, a.err)
	}
}

// TestDirectoryHandshakeOverTLS: the handshake runs inside the TLS
// connection, with the same outcomes.
func TestDirectoryHandshakeOverTLS(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	one, _ := tlsLayer(t, pki.Reloader(pki.Voter(1001)))
	two, _ := tlsLayer(t, pki.Reloader(pki.Voter(1002)))
	identityLayer(t, one, "1001", "dirOneAAAAAAAAAAAAAAAA")
	identityLayer(t, two, "1002", "dirTwoBBBBBBBBBBBBBBBB")

	acc := acceptAndRead(two, 2)
	c, err := one.Dial(dialAddr(two, "dirTwoBBBBBBBBBBBBBBBB"), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("ok"))
	if a := <-acc; a.err != nil || string(a.data) != "ok" {
		t.Fatalf("accepted side read %q, %v", a.data, a.err)
	}
	acc = acceptAndRead(two, 1)
	if _, err := one.Dial(dialAddr(two, "dirOldCCCCCCCCCCCCCCCC"), ioTimeout); !errors.Is(err, ErrDirectoryMismatch) {
		t.Fatalf("dial for another directory over TLS: %v, want ErrDirectoryMismatch", err)
	}
	<-acc
}
