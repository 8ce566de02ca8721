package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func loadFiles(t *testing.T, dir, name string, expect tlsconfig.PeerCheck) *tlsconfig.Reloader {
	t.Helper()
	r, err := tlsconfig.NewReloader(tlsconfig.Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, name+".crt"),
		Key: filepath.Join(dir, name+".key")}, tlsconfig.Options{Expect: expect})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// handshakeOK connects a client config to a server config on 127.0.0.1
// and reports whether both sides completed the handshake.
func handshakeOK(t *testing.T, server, client *tls.Config) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = tc.Write([]byte{1})
		done <- err
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), client)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		c.Close()
	}
	serr := <-done
	return err == nil && serr == nil
}

func TestCertsWritesAWorkingPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := runCmd("certs", "--out", dir, "--voters", "1001,1002", "--brokers", "2", "--clients", "admin")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range []string{"ca.crt", "ca.key", "voter-1001.crt", "voter-1002.key", "broker-2.crt", "client-admin.key"} {
		if !strings.Contains(out, filepath.Join(dir, strings.TrimSuffix(strings.TrimSuffix(f, ".crt"), ".key"))) {
			t.Errorf("output does not mention %s:\n%s", f, out)
		}
	}
	for _, key := range []string{"ca.key", "voter-1001.key", "client-admin.key"} {
		if st, err := os.Stat(filepath.Join(dir, key)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, err %v", key, st.Mode().Perm(), err)
		}
	}
	v1 := loadFiles(t, dir, "voter-1001", tlsconfig.Voters(1001))
	v2 := loadFiles(t, dir, "voter-1002", tlsconfig.Voters(1002))
	b2 := loadFiles(t, dir, "broker-2", tlsconfig.Broker(2))
	admin := loadFiles(t, dir, "client-admin", nil)
	if id := admin.Identity(); id.IsVoter() || id.IsBroker() || id.Principal() != "User:admin" {
		t.Fatalf("client identity %v", id)
	}
	voters := tlsconfig.Voters(1001, 1002)
	if !handshakeOK(t, v1.ServerConfig(voters), v2.ClientConfig("", voters)) {
		t.Fatal("voter 1002 cannot reach voter 1001")
	}
	if !handshakeOK(t, v1.ServerConfig(nil), b2.ClientConfig("127.0.0.1", nil)) {
		t.Fatal("broker 2 cannot reach voter 1001's listener by IP")
	}
	if !handshakeOK(t, b2.ServerConfig(nil), v1.ClientConfig("localhost", tlsconfig.Broker(2))) {
		t.Fatal("voter 1001 cannot reach broker 2")
	}
	if !handshakeOK(t, v1.ServerConfig(nil), admin.ClientConfig("127.0.0.1", nil)) {
		t.Fatal("the admin client cannot reach voter 1001")
	}
	// A client certificate is for client use only.
	if handshakeOK(t, admin.ServerConfig(nil), v1.ClientConfig("127.0.0.1", nil)) {
		t.Fatal("a client certificate served as a server")
	}

	// Existing files are kept without --force.
	before, _ := os.ReadFile(filepath.Join(dir, "voter-1001.crt"))
	if code, _, errOut := runCmd("certs", "--out", dir, "--voters", "1001", "--brokers", "", "--clients", ""); code != exitFailed || !strings.Contains(errOut, "--force") {
		t.Fatalf("rerun without --force: exit %d: %s", code, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "voter-1001.crt")); !bytes.Equal(before, after) {
		t.Fatal("a refused run changed voter-1001.crt")
	}
	// --force reissues with the same CA: a rotation the running node
	// picks up with Reload.
	oldSerial := v1.Leaf().SerialNumber
	if code, out, errOut := runCmd("certs", "--out", dir, "--voters", "1001", "--brokers", "4", "--clients", "", "--force"); code != exitOK || !strings.Contains(out, "using the CA") {
		t.Fatalf("rotation run: exit %d: %s%s", code, out, errOut)
	}
	if err := v1.Reload(); err != nil {
		t.Fatal(err)
	}
	if v1.Leaf().SerialNumber.Cmp(oldSerial) == 0 {
		t.Fatal("voter-1001.crt was not reissued")
	}
	b4 := loadFiles(t, dir, "broker-4", tlsconfig.Broker(4))
	if !handshakeOK(t, v2.ServerConfig(nil), b4.ClientConfig("127.0.0.1", nil)) || !handshakeOK(t, v2.ServerConfig(voters), v1.ClientConfig("", voters)) {
		t.Fatal("certificates of the second run do not chain to the first run's CA")
	}
}

// A node with both roles gets one certificate naming both ids: it serves
// as the voter to the other voters and as the broker to the controller.
func TestCertsCombinedNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, _, errOut := runCmd("certs", "--out", dir, "--voters", "1002", "--brokers", "", "--clients", "", "--combined", "1001:1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	both := loadFiles(t, dir, "node-1001-1", func(id tlsconfig.Identity) error {
		if err := tlsconfig.Voters(1001)(id); err != nil {
			return err
		}
		return tlsconfig.Broker(1)(id)
	})
	v2 := loadFiles(t, dir, "voter-1002", tlsconfig.Voters(1002))
	voters := tlsconfig.Voters(1001, 1002)
	if !handshakeOK(t, v2.ServerConfig(voters), both.ClientConfig("", voters)) {
		t.Fatal("the combined certificate is not taken as voter 1001")
	}
	if !handshakeOK(t, both.ServerConfig(nil), v2.ClientConfig("127.0.0.1", tlsconfig.Broker(1))) {
		t.Fatal("the combined certificate is not taken as broker 1")
	}
}

func TestCertsUsage(t *testing.T) {
	if code, out, _ := runCmd("certs", "--help"); code != exitOK || !strings.Contains(out, "ctrlquorum://voter/<id>") {
		t.Fatalf("--help: exit %d:\n%s", code, out)
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--voters", "1,2", "--brokers", "2"},
		{"--voters", "x"},
		{"--brokers", "-1"},
		{"--brokers", "3,3"},
		{"--clients", "bad name"},
		{"--combined", "1001"},
		{"--combined", "5:5"},
		{"--days", "0"},
		{"--hosts", ""},
		{"extra"},
	} {
		code, _, errOut := runCmd(append([]string{"certs", "--out", filepath.Join(dir, "x")}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused command created its output folder")
	}
}
