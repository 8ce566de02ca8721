package meta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	self, other := NewUUID(), NewUUID()
	voters := []Voter{{NodeID: 1, Addr: "h:1", DirectoryID: self}, {NodeID: 2, Addr: "h:2", DirectoryID: other}}
	cluster := NewUUID().String()
	p, err := Format(dir, FormatOptions{ClusterID: cluster, NodeID: 1, InitialVoters: voters})
	if err != nil {
		t.Fatal(err)
	}
	if p.ClusterID != cluster || p.DirectoryID != self || len(p.InitialVoters) != 2 || p.Version != Version {
		t.Fatalf("formatted %+v: want the cluster id given and this node's directory id from the list", p)
	}
	if _, err := Format(dir, FormatOptions{NodeID: 1}); !errors.Is(err, ErrFormatted) {
		t.Fatalf("second format: %v, want ErrFormatted", err)
	}
	if kept, err := Format(dir, FormatOptions{NodeID: 7, IgnoreFormatted: true}); err != nil || kept.DirectoryID != self || kept.NodeID != 1 {
		t.Fatalf("--ignore-formatted: %+v, %v; want the directory kept", kept, err)
	}

	for name, o := range map[string]FormatOptions{
		"not in voters": {NodeID: 3, InitialVoters: voters},
		"bad cluster":   {NodeID: 1, ClusterID: "x"},
		"both":          {NodeID: 1, InitialVoters: voters, Standalone: "h:1"},
		"bad address":   {NodeID: 1, Standalone: "nohost"},
	} {
		d := filepath.Join(t.TempDir(), "d")
		if _, err := Format(d, o); err == nil {
			t.Errorf("%s: formatted", name)
		}
		if _, err := Read(d); !errors.Is(err, ErrUnformatted) {
			t.Errorf("%s: a refused format wrote something: %v", name, err)
		}
	}

	d := t.TempDir()
	solo, err := Format(d, FormatOptions{NodeID: 5, Standalone: "127.0.0.1:9093"})
	if err != nil || len(solo.InitialVoters) != 1 || solo.InitialVoters[0] != (Voter{NodeID: 5, Addr: "127.0.0.1:9093", DirectoryID: solo.DirectoryID}) {
		t.Fatalf("standalone: %+v, %v", solo, err)
	}
	if _, err := ParseUUID(solo.ClusterID); err != nil {
		t.Fatalf("made cluster id %q: %v", solo.ClusterID, err)
	}
	join, err := Format(t.TempDir(), FormatOptions{NodeID: 5, ClusterID: cluster})
	if err != nil || len(join.InitialVoters) != 0 || join.DirectoryID.IsZero() {
		t.Fatalf("joining node: %+v, %v", join, err)
	}
}

func TestFormatAndAdoptWithRaftState(t *testing.T) {
	for _, name := range raftStateNames {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Format(dir, FormatOptions{NodeID: 1}); !errors.Is(err, ErrHasRaftState) {
			t.Fatalf("%s: Format = %v, want ErrHasRaftState", name, err)
		}
		p, err := Adopt(dir, "legacy", 1)
		if err != nil || p.ClusterID != "legacy" || p.NodeID != 1 || p.DirectoryID.IsZero() || len(p.InitialVoters) != 0 {
			t.Fatalf("%s: Adopt = %+v, %v", name, p, err)
		}
		if _, err := Adopt(dir, "legacy", 1); !errors.Is(err, ErrFormatted) {
			t.Fatalf("%s: second Adopt = %v, want ErrFormatted", name, err)
		}
	}
	if _, err := Adopt(t.TempDir(), "c", 1); !errors.Is(err, ErrUnformatted) {
		t.Fatalf("Adopt of an empty directory: %v, want ErrUnformatted", err)
	}
}
