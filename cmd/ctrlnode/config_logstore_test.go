package main

import (
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestRaftLogStoreSetting: raft.log.store defaults to the store of a new
// data directory, is taken from a file, the environment or a flag into
// server.Config, and an unknown store is refused naming the setting and
// where it was set.
func TestRaftLogStoreSetting(t *testing.T) {
	_, nc, err := buildFrom(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Config.RaftLogStore != raftlog.DefaultLogStore {
		t.Errorf("default: %q, want %q", nc.Config.RaftLogStore, raftlog.DefaultLogStore)
	}
	for _, tc := range []struct {
		file  string
		env   []string
		flags map[string]string
		want  raftlog.LogStore
	}{
		{"raft.log.store = wal\n", nil, nil, raftlog.LogStoreWAL},
		{"raft.log.store = wal\n", []string{"CTRLNODE_RAFT_LOG_STORE=bolt"}, nil, raftlog.LogStoreBolt},
		{"", []string{"CTRLNODE_RAFT_LOG_STORE=bolt"}, map[string]string{"raft.log.store": "segments"}, raftlog.LogStoreSegments},
	} {
		_, nc, err := buildFrom(t, tc.file, tc.env, tc.flags)
		if err != nil || nc.Config.RaftLogStore != tc.want {
			t.Errorf("file %q env %q flags %v: %q, %v; want %q", tc.file, tc.env, tc.flags, nc.Config.RaftLogStore, err, tc.want)
		}
	}
	_, _, err = buildFrom(t, "\n\nraft.log.store = leveldb\n", nil, nil)
	if want := `raft.log.store (from n.conf line 3): unknown raft log store "leveldb" (want segments, wal or bolt)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("leveldb: %v, want %q", err, want)
	}
}
