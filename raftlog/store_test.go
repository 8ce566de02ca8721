package raftlog

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestStoresPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStores(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasExistingState(); err != nil || has {
		t.Fatalf("fresh dir: HasExistingState = %v, %v; want false", has, err)
	}
	if err := s.Log.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s, err = OpenStores(dir, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if has, err := s.HasExistingState(); err != nil || !has {
		t.Fatalf("reopened dir: HasExistingState = %v, %v; want true", has, err)
	}
	var l raft.Log
	if err := s.Log.GetLog(1, &l); err != nil || string(l.Data) != "a" {
		t.Fatalf("log entry after reopen: %q, %v", l.Data, err)
	}
	if snaps, err := s.Snapshots.List(); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots: %v, %v; want none", snaps, err)
	}
}
