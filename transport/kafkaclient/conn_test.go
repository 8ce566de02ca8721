package kafkaclient

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

func TestControlClientID(t *testing.T) {
	id, off, ok := ParseControlClientID(ControlClientID(1002, 1<<40))
	if !ok || id != 1002 || off != 1<<40 {
		t.Fatalf("round trip: %d %d %v", id, off, ok)
	}
	for _, bad := range []string{"", "kgo", "ctrlquorum-controller-1", "ctrlquorum-controller-x;offset=1", "ctrlquorum-controller-1;offset=-1"} {
		if _, _, ok := ParseControlClientID(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestRequestAgainstKafkawire(t *testing.T) {
	srv, err := kafkawire.Listen("127.0.0.1:0", kafkawire.Config{
		APIs: map[int16]int16{3: 5},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			resp := req.ResponseKind().(*kmsg.MetadataResponse)
			resp.ControllerID = 7
			cid := c.ClientID
			resp.ClusterID = &cid
			return resp, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := Dial(ctx, srv.Addr().String(), Options{ClientID: "me"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, ok := c.Version(3); !ok || v != 5 {
		t.Fatalf("metadata version %d %v", v, ok)
	}
	if _, ok := c.Version(4); ok {
		t.Fatal("LeaderAndIsr is not served there")
	}
	req := kmsg.NewPtrMetadataRequest()
	if err := c.Pick(req, 1); err != nil || req.Version != 5 {
		t.Fatalf("pick: %v v%d", err, req.Version)
	}
	resp, err := c.RequestAs(ctx, "other", req)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.(*kmsg.MetadataResponse); m.ControllerID != 7 || *m.ClusterID != "other" {
		t.Fatalf("%+v", m)
	}
	// A request the server closes the connection on breaks the Conn.
	bad := kmsg.NewPtrLeaderAndISRRequest()
	if _, err := c.Request(ctx, bad); err == nil {
		t.Fatal("unserved request succeeded")
	}
	if _, err := c.Request(ctx, req); !errors.Is(err, ErrBroken) {
		t.Fatalf("after a failure: %v", err)
	}
}

// TestApiVersionsFallback: a server that only speaks ApiVersions v0–2
// answers v3 with UNSUPPORTED_VERSION in a v0 body; the client asks again
// at the version the server names.
func TestApiVersionsFallback(t *testing.T) {
	keys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 2}, {ApiKey: 4, MinVersion: 1, MaxVersion: 3}}
	addr, asked, done := apiVersionsServer(t, keys)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-done
	if len(*asked) != 2 || (*asked)[0] != 3 || (*asked)[1] != 2 {
		t.Fatalf("asked versions %v", *asked)
	}
	if v, ok := c.Version(4); !ok || v != 3 {
		t.Fatalf("LeaderAndIsr version %d %v", v, ok)
	}
	if err := c.Pick(kmsg.NewPtrLeaderAndISRRequest(), 5); err == nil {
		t.Fatal("picked a version below the minimum asked")
	}
}

// apiVersionsServer answers ApiVersions, and only that, on one
// connection, listing keys; a request above the version it lists for
// ApiVersions (key 18) gets UNSUPPORTED_VERSION in a v0 body. It records
// the versions asked; done closes when the connection does.
func apiVersionsServer(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) (addr string, asked *[]int16, done chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	asked = new([]int16)
	done = make(chan struct{})
	maxVersion := int16(3)
	for _, k := range keys {
		if k.ApiKey == 18 {
			maxVersion = k.MaxVersion
		}
	}
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, frame); err != nil {
				return
			}
			version := int16(binary.BigEndian.Uint16(frame[2:]))
			*asked = append(*asked, version)
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ApiKeys = keys
			if version > maxVersion {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				version = 0
			}
			resp.SetVersion(version)
			out := binary.BigEndian.AppendUint32(nil, 0)
			out = append(out, frame[4:8]...) // correlation id
			out = resp.AppendTo(out)
			binary.BigEndian.PutUint32(out, uint32(len(out)-4))
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String(), asked, done
}

// TestNegotiation: each request goes at the highest version both the
// peer and kmsg know, and none when the ranges do not meet.
func TestNegotiation(t *testing.T) {
	metadataMax := kmsg.NewPtrMetadataRequest().MaxVersion()
	keys := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 18, MaxVersion: 3},
		{ApiKey: 3, MinVersion: 0, MaxVersion: metadataMax + 5}, // newer than kmsg
		{ApiKey: 4, MinVersion: 1, MaxVersion: 3},               // older
		{ApiKey: 19, MinVersion: 100, MaxVersion: 101},          // only versions kmsg does not know
		{ApiKey: 9999, MaxVersion: 1},                           // a key kmsg does not know
	}
	addr, _, _ := apiVersionsServer(t, keys)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		key     int16
		version int16
		ok      bool
	}{{3, metadataMax, true}, {4, 3, true}, {19, 0, false}, {9999, 0, false}, {20, 0, false}} {
		if v, ok := c.Version(tc.key); v != tc.version || ok != tc.ok {
			t.Errorf("key %d: version %d %v, want %d %v", tc.key, v, ok, tc.version, tc.ok)
		}
	}
	if got := c.Versions(); len(got) != len(keys) || got[4] != (VersionRange{1, 3}) {
		t.Errorf("versions %v", got)
	}
	req := kmsg.NewPtrMetadataRequest()
	if err := c.Pick(req, 1); err != nil || req.Version != metadataMax {
		t.Errorf("pick metadata: %v v%d", err, req.Version)
	}
	if err := c.Pick(kmsg.NewPtrLeaderAndISRRequest(), 4); err == nil {
		t.Error("picked LeaderAndIsr below the minimum asked")
	}
	if err := c.Pick(kmsg.NewPtrCreateTopicsRequest(), 0); err == nil {
		t.Error("picked CreateTopics, which the peer does not list")
	}
}
