package datadir_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir"
)

// The fixtures: v0 as the release before meta.properties wrote it (commit
// 293de9c: no identity file, log records 1-18, snapshot format 2), v1 as
// this build writes it (meta.properties, records 19-22 at metadata.version
// 2, snapshot format 4). A release that changes a format the data
// directory holds adds the next one (see genfixture); go generate keeps
// those that exist.
//
//go:generate go run ./datadirtest/genfixture -name v1
//go:generate go run ./datadirtest/genfixture -name v0 -release 293de9c

// TestFixtures opens every kept data directory — one per released format
// and log store, in testdata/fixtures — with this build: verified offline,
// replayed offline, and run by a voter, each must arrive at the state hash
// recorded with it (as this build computes it: the hash's encoding is not
// promised across builds, see genfixture -rehash). A build that can no
// longer read an older release's directory, or reads it into another
// image, fails here.
func TestFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "*"))
	if len(dirs) < 3 {
		t.Fatalf("fixtures: %v; want at least one per log store", dirs)
	}
	for _, fixture := range dirs {
		t.Run(filepath.Base(filepath.Dir(fixture))+"/"+filepath.Base(fixture), func(t *testing.T) {
			var want struct {
				StateHash string `json:"state_hash"`
				LastIndex uint64 `json:"last_index"`
			}
			raw, err := os.ReadFile(filepath.Join(fixture, "expect.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
				t.Fatal(err)
			}

			r, err := datadir.Verify(dir, nil)
			if err != nil || len(r.Problems) != 0 || r.Last != want.LastIndex {
				t.Fatalf("verify: %+v, %v", r, err)
			}
			f, err := datadir.Replay(dir)
			if err != nil {
				t.Fatal(err)
			}
			if h, idx := f.StateHash(); h.String() != want.StateHash || idx != want.LastIndex {
				t.Fatalf("replayed to %s at %d; the release that wrote it had %s at %d", h, idx, want.StateHash, want.LastIndex)
			}

			live := fsm.New(fsm.Options{})
			cfg := voter.Config{NodeID: "1", BindAddr: freeAddr(t), DataDir: dir, FSM: live}
			voter.FastTimeouts(&cfg)
			v, err := voter.Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Shutdown()
			testkit.WaitFor(t, 30*time.Second, "the voter to apply the fixture's log", func() bool {
				return live.AppliedIndex() >= want.LastIndex
			})
			if h, _ := live.StateHash(); h.String() != want.StateHash {
				t.Fatalf("a voter started on it has state hash %s; the release that wrote it had %s", h, want.StateHash)
			}
			if err := live.Halted(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
