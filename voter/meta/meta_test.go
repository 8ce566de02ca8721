package meta

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	self := NewUUID()
	p := Properties{
		ClusterID: NewUUID().String(), NodeID: 1001, DirectoryID: self,
		InitialVoters: []Voter{
			{NodeID: 1001, Addr: "127.0.0.1:19192", DirectoryID: self},
			{NodeID: 1002, Addr: "[::1]:19193", DirectoryID: NewUUID()},
		},
	}
	if err := Write(dir, p); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	p.Version = Version
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("read %+v, wrote %+v", got, p)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want meta.properties alone: %v", len(entries), entries)
	}

	// Rewriting replaces the file.
	p.InitialVoters = nil
	if err := Write(dir, p); err != nil {
		t.Fatal(err)
	}
	if got, err = Read(dir); err != nil || got.InitialVoters != nil {
		t.Fatalf("after rewrite: %+v, %v", got, err)
	}
}

func TestReadUnformatted(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		if _, err := Read(dir); !errors.Is(err, ErrUnformatted) {
			t.Fatalf("Read(%s) = %v, want ErrUnformatted", dir, err)
		}
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	good := "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=1\ndirectory.id=Xl9rEOEoRkSAi3lxfHTvIQ\n"
	if _, err := Unmarshal([]byte(good)); err != nil {
		t.Fatalf("good file refused: %v", err)
	}
	cases := map[string]string{
		"newer version":  strings.Replace(good, "version=1", "version=2", 1),
		"no cluster id":  strings.Replace(good, "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n", "", 1),
		"unknown key":    good + "log.dirs=/tmp\n",
		"twice":          good + "node.id=2\n",
		"bad node id":    strings.Replace(good, "node.id=1", "node.id=x", 1),
		"bad dir id":     strings.Replace(good, "Xl9rEOEoRkSAi3lxfHTvIQ", "Xl9rEOEoRkSAi3lxfHTvI", 1),
		"zero dir id":    strings.Replace(good, "Xl9rEOEoRkSAi3lxfHTvIQ", "AAAAAAAAAAAAAAAAAAAAAA", 1),
		"no equals":      good + "garbage\n",
		"self not voter": good + "initial.voters=2@h:1:MkU3OEVBNTcwNTJENDM2Qg\n",
		"self other dir": good + "initial.voters=1@h:1:MkU3OEVBNTcwNTJENDM2Qg\n",
	}
	for name, text := range cases {
		if _, err := Unmarshal([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters("1001@127.0.0.1:19192:Xl9rEOEoRkSAi3lxfHTvIQ, 1002@[::1]:9093:MkU3OEVBNTcwNTJENDM2Qg")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].NodeID != 1001 || vs[0].Addr != "127.0.0.1:19192" || vs[1].Addr != "[::1]:9093" || vs[1].DirectoryID.String() != "MkU3OEVBNTcwNTJENDM2Qg" {
		t.Fatalf("parsed %+v", vs)
	}
	for _, bad := range []string{
		"", "1001", "1001@127.0.0.1:19192", "x@h:1:Xl9rEOEoRkSAi3lxfHTvIQ", "-1@h:1:Xl9rEOEoRkSAi3lxfHTvIQ",
		"1@h:0:Xl9rEOEoRkSAi3lxfHTvIQ", "1@h:70000:Xl9rEOEoRkSAi3lxfHTvIQ", "1@:1:Xl9rEOEoRkSAi3lxfHTvIQ",
		"1@h:1:Xl9rEOEoRkSAi3lxfHTvIQ,1@g:1:MkU3OEVBNTcwNTJENDM2Qg",
		"1@h:1:Xl9rEOEoRkSAi3lxfHTvIQ,2@h:1:MkU3OEVBNTcwNTJENDM2Qg",
		"1@h:1:Xl9rEOEoRkSAi3lxfHTvIQ,2@g:1:Xl9rEOEoRkSAi3lxfHTvIQ",
		"01@h:1:Xl9rEOEoRkSAi3lxfHTvIQ", "1@::1:1:Xl9rEOEoRkSAi3lxfHTvIQ",
	} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) accepted", bad)
		}
	}
}

func TestNewUUID(t *testing.T) {
	seen := map[UUID]bool{}
	for range 1000 {
		u := NewUUID()
		s := u.String()
		if len(s) != 22 || s[0] == '-' || seen[u] {
			t.Fatalf("NewUUID gave %s (seen before: %v)", s, seen[u])
		}
		seen[u] = true
		if back, err := ParseUUID(s); err != nil || back != u {
			t.Fatalf("ParseUUID(%s) = %v, %v", s, back, err)
		}
	}
}

// FuzzParseVoters: whatever ParseVoters accepts, it prints back to a text
// that parses to the same voters, and Properties holding them round-trip
// through the file.
func FuzzParseVoters(f *testing.F) {
	f.Add("1001@127.0.0.1:19192:Xl9rEOEoRkSAi3lxfHTvIQ")
	f.Add("1@[::1]:9093:MkU3OEVBNTcwNTJENDM2Qg, 2@host.example:1:Xl9rEOEoRkSAi3lxfHTvIQ")
	f.Add("1@h:1:AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		vs, err := ParseVoters(s)
		if err != nil {
			return
		}
		again, err := ParseVoters(FormatVoters(vs))
		if err != nil {
			t.Fatalf("ParseVoters(%q) gave %v, whose text %q is refused: %v", s, vs, FormatVoters(vs), err)
		}
		if !reflect.DeepEqual(again, vs) {
			t.Fatalf("round trip of %q: %v then %v", s, vs, again)
		}
		p := Properties{Version: Version, ClusterID: "c", NodeID: vs[0].NodeID, DirectoryID: vs[0].DirectoryID, InitialVoters: vs}
		back, err := Unmarshal(p.Marshal())
		if err != nil {
			t.Fatalf("properties with %v: %v", vs, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("properties round trip: %+v then %+v", p, back)
		}
	})
}

// FuzzUnmarshal: no input panics, and whatever is accepted writes back to
// the same properties.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte("version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=1\ndirectory.id=Xl9rEOEoRkSAi3lxfHTvIQ\n"))
	f.Add([]byte("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=Xl9rEOEoRkSAi3lxfHTvIQ\ninitial.voters=1@h:1:Xl9rEOEoRkSAi3lxfHTvIQ\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Unmarshal(data)
		if err != nil {
			return
		}
		back, err := Unmarshal(p.Marshal())
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("accepted %q as %+v; its text gives %+v, %v", data, p, back, err)
		}
	})
}
