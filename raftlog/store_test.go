package raftlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func TestStoresPersistAcrossReopen(t *testing.T) {
	for _, kind := range []LogStore{LogStoreWAL, LogStoreBolt} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenStores(dir, StoreOptions{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if s.Kind != kind {
				t.Fatalf("opened a %s store, want %s", s.Kind, kind)
			}
			if has, err := s.HasExistingState(); err != nil || has {
				t.Fatalf("fresh dir: HasExistingState = %v, %v; want false", has, err)
			}
			if err := s.Log.StoreLogs([]*raft.Log{
				{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
				{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("b")},
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}

			// Reopened without saying which: the directory's own store.
			s, err = OpenStores(dir, StoreOptions{})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			if s.Kind != kind {
				t.Fatalf("reopened as %s, want the %s it holds", s.Kind, kind)
			}
			defer s.Close()
			if has, err := s.HasExistingState(); err != nil || !has {
				t.Fatalf("reopened dir: HasExistingState = %v, %v; want true", has, err)
			}
			var l raft.Log
			if err := s.Log.GetLog(2, &l); err != nil || string(l.Data) != "b" {
				t.Fatalf("log entry after reopen: %q, %v", l.Data, err)
			}
			if term, err := s.Stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
				t.Fatalf("term after reopen: %d, %v; want 7", term, err)
			}
			if snaps, err := s.Snapshots.List(); err != nil || len(snaps) != 0 {
				t.Fatalf("snapshots: %v, %v; want none", snaps, err)
			}
		})
	}
}

func TestOpenStoresRefusesTheOtherStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStores(dir, StoreOptions{Kind: LogStoreWAL})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Log.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenStores(dir, StoreOptions{Kind: LogStoreBolt}); err == nil || !strings.Contains(err.Error(), "holds a wal raft log") {
		t.Fatalf("wal dir opened as bolt: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, BoltFile)); !os.IsNotExist(err) {
		t.Fatalf("the refused open left %s behind: %v", BoltFile, err)
	}

	// Both present: neither is guessed at.
	if err := os.WriteFile(filepath.Join(dir, BoltFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStores(dir, StoreOptions{Kind: LogStoreWAL}); err == nil || !strings.Contains(err.Error(), "both a wal raft log") {
		t.Fatalf("dir with both stores: %v, want a refusal", err)
	}
	if _, err := OpenStores(t.TempDir(), StoreOptions{Kind: "zfs"}); err == nil || !strings.Contains(err.Error(), `unknown raft log store "zfs"`) {
		t.Fatalf("unknown store: %v", err)
	}
}
