// Package zktest runs a real ZooKeeper server (Debian's zookeeper
// package) for tests: on a free loopback port, with its data in a temp
// dir, stoppable and restartable on the same port and data.
package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// Jar is where Debian's zookeeper package puts the server.
const Jar = "/usr/share/java/zookeeper.jar"

// ConfDir holds the package's log4j configuration; it goes first on the
// class path as in the package's own scripts.
const ConfDir = "/etc/zookeeper/conf"

// Server is one standalone ZooKeeper server.
type Server struct {
	port int
	dir  string
	// Extra lines for zoo.cfg.
	extra []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Available reports why a server cannot run here ("" when it can).
func Available() string {
	if _, err := exec.LookPath("java"); err != nil {
		return "java is not installed (apt-get install zookeeper brings default-jre-headless)"
	}
	if _, err := os.Stat(Jar); err != nil {
		return Jar + " is missing (apt-get install zookeeper)"
	}
	return ""
}

// Start starts a server, skipping the test when java or the jar is
// missing (failing it with CI=true: see testkit.Need). extra lines are
// added to zoo.cfg. It is stopped in t.Cleanup.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if why := Available(); why != "" {
		testkit.Missing(t, "a ZooKeeper server", why)
	}
	s, err := Launch(t.TempDir(), extra...)
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a server with its files in dir (which must exist), on a
// free loopback port, and waits until it answers ruok. The caller stops
// it. Use Start in a test; Launch serves a TestMain that shares one
// server between tests.
func Launch(dir string, extra ...string) (*Server, error) {
	if why := Available(); why != "" {
		return nil, errors.New(why)
	}
	s := &Server{dir: dir, extra: extra}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// Addr is the client address, 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Dir is the server's directory (config, data, log).
func (s *Server) Dir() string { return s.dir }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	cfg := []string{
		"tickTime=500",
		"initLimit=10",
		"syncLimit=5",
		"dataDir=" + data,
		fmt.Sprintf("clientPort=%d", s.port),
		"clientPortAddress=127.0.0.1",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		"maxClientCnxns=0",
		"minSessionTimeout=1000",
		"maxSessionTimeout=60000",
		"autopurge.purgeInterval=0",
		"preAllocSize=4096",
	}
	cfg = append(cfg, s.extra...)
	cfgPath := filepath.Join(s.dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true", "-Djute.maxbuffer=4194304",
		"-cp", ConfDir+":"+Jar, "org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a stop reaches the JVM and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start zookeeper: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.log = cmd, done, logf
	s.mu.Unlock()
	if err := s.waitReady(done, 30*time.Second); err != nil {
		s.Stop()
		return fmt.Errorf("%w\n%s", err, s.tail())
	}
	return nil
}

// waitReady polls until the server answers ruok with imok and serves
// requests (ZooKeeper answers imok while it still loads its database and
// closes client sessions until it is done: srvr tells the two apart).
func (s *Server) waitReady(exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if Ruok(s.Addr()) && Serving(s.Addr()) {
			return nil
		}
		select {
		case <-exited:
			return errors.New("zookeeper exited before it answered ruok")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zookeeper did not answer ruok within %v", timeout)
		}
		time.Sleep(25 * time.Millisecond) // polling interval
	}
}

// Ruok sends the ruok four-letter word and reports whether the answer
// was imok.
func Ruok(addr string) bool { return bytes.Equal(fourLetter(addr, "ruok"), []byte("imok")) }

// Serving reports whether the server serves client requests (srvr
// reports its mode).
func Serving(addr string) bool {
	return bytes.Contains(fourLetter(addr, "srvr"), []byte("Mode: "))
}

func fourLetter(addr, cmd string) []byte {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return nil
	}
	b, _ := io.ReadAll(c)
	return b
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit. The port is free and the data intact afterwards.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done, logf := s.cmd, s.done, s.log
	s.cmd, s.done, s.log = nil, nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	if logf != nil {
		logf.Close()
	}
	// Wait until the port is released, so a restart can bind it.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l, err := net.Listen("tcp", s.Addr())
		if err == nil {
			l.Close()
			return
		}
		time.Sleep(25 * time.Millisecond) // polling interval
	}
}

// Restart stops the server if it runs and starts it again on the same
// port and data directory.
func (s *Server) Restart() error {
	s.Stop()
	return s.StartAgain()
}

// StartAgain starts a stopped server on the same port and data.
func (s *Server) StartAgain() error {
	if s.Running() {
		return nil
	}
	if err := s.start(); err != nil {
		return fmt.Errorf("zktest: start again: %w", err)
	}
	return nil
}

func (s *Server) tail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
