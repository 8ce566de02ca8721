package zktest

import (
	"bytes"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestStopRestartKeepsPortAndData(t *testing.T) {
	s := Start(t)
	if !Ruok(s.Addr()) {
		t.Fatal("server started but does not answer ruok")
	}
	write := func() {
		c, _, err := zk.Connect([]string{s.Addr()}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Create("/kept", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	write()
	addr := s.Addr()
	s.Stop()
	if s.Running() || Ruok(addr) {
		t.Fatal("server still answers after Stop")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || !Ruok(addr) {
		t.Fatalf("restarted on %s (was %s), ruok %v", s.Addr(), addr, Ruok(addr))
	}
	c, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, _, err := c.Get("/kept")
	if err != nil || !bytes.Equal(data, []byte("v1")) {
		t.Fatalf("data after restart: %q %v", data, err)
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
