// Command genfixture writes the on-disk compatibility fixtures of package
// datadir: a data directory per log store under
// testdata/fixtures/<name>/<store>/, with expect.json holding the state
// hash this build computes for it and its last index. Run it from
// voter/datadir:
//
//	go run ./datadirtest/genfixture -name v2                    # written by this build (datadirtest.Write)
//	go run ./datadirtest/genfixture -name v0 -release 293de9c   # written by the build at a commit
//	go run ./datadirtest/genfixture -rehash                     # expected hashes as this build computes them
//
// A release that changes a format the data directory holds adds a fixture
// under the next name (and that name in fixtures_test.go's go:generate
// line). An existing fixture is never rewritten: it is what its release
// wrote. -release extracts the commit with git archive and runs, inside
// it, the program in release_writer.go.txt, which writes the same sample
// with that release's API. -rehash is for a build that changes how the
// state hash encodes an image (not promised across builds, see
// docs/formats.md): it replays every fixture with this build and rewrites
// the expected hashes, once log dump shows the same content.
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir/datadirtest"
)

//go:embed release_writer.go.txt
var releaseWriter []byte

var stores = []rl.LogStore{rl.LogStoreSegments, rl.LogStoreWAL, rl.LogStoreBolt}

func main() {
	name := flag.String("name", "", "the fixture's name: the format it keeps, e.g. v1")
	release := flag.String("release", "", "write it with the build at this commit instead of this build")
	rehash := flag.Bool("rehash", false, "recompute every fixture's expected state hash with this build")
	out := flag.String("out", "testdata/fixtures", "folder of the fixtures")
	flag.Parse()
	var err error
	switch {
	case *rehash:
		err = rehashAll(*out)
	case *name == "":
		err = fmt.Errorf("-name is required")
	default:
		err = generate(filepath.Join(*out, *name), *release)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "genfixture: %v\n", err)
		os.Exit(1)
	}
}

func generate(root, release string) error {
	if _, err := os.Stat(root); err == nil {
		fmt.Printf("%s exists and is kept: a fixture is what its release wrote and is never rewritten\n", root)
		return nil
	}
	for _, store := range stores {
		dir := filepath.Join(root, string(store))
		info := map[string]any{}
		if release == "" {
			s, err := datadirtest.Write(dir, store)
			if err != nil {
				return fmt.Errorf("%s: %w", store, err)
			}
			info["snapshot_index"] = s.Snapshot
		} else if err := writeWithRelease(release, dir, store, info); err != nil {
			return err
		}
		if err := trimSegments(filepath.Join(dir, rl.LogDir)); err != nil {
			return err
		}
		if err := writeExpect(dir, info); err != nil {
			return err
		}
	}
	return nil
}

// writeWithRelease runs release_writer.go.txt in a checkout of commit.
func writeWithRelease(commit, dir string, store rl.LogStore, info map[string]any) error {
	src, err := os.MkdirTemp("", "genfixture-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("git rev-parse: %w", err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", string(bytes.TrimSpace(top)), commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %v: %s", commit, err, out)
	}
	if err := os.MkdirAll(filepath.Join(src, "cmd", "fixturewriter"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "cmd", "fixturewriter", "main.go"), releaseWriter, 0o644); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	run := exec.Command("go", "run", "./cmd/fixturewriter", "-dir", abs, "-store", string(store))
	run.Dir, run.Stderr = src, os.Stderr
	out, err := run.Output()
	if err != nil {
		return fmt.Errorf("the writer at %s: %w", commit, err)
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("the writer at %s printed %q: %w", commit, out, err)
	}
	info["written_by"] = commit
	return nil
}

// writeExpect replays dir with this build and writes expect.json: its
// state hash and last index, with info.
func writeExpect(dir string, info map[string]any) error {
	f, err := datadir.Replay(dir)
	if err != nil {
		return fmt.Errorf("replay %s: %w", dir, err)
	}
	h, last := f.StateHash()
	info["state_hash"], info["last_index"] = h.String(), last
	b, _ := json.MarshalIndent(info, "", "  ")
	fmt.Printf("%s: state hash %s at index %d\n", dir, h, last)
	return os.WriteFile(filepath.Join(dir, "expect.json"), append(b, '\n'), 0o644)
}

func rehashAll(out string) error {
	dirs, _ := filepath.Glob(filepath.Join(out, "*", "*"))
	for _, dir := range dirs {
		info := map[string]any{}
		raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &info); err != nil {
			return err
		}
		// Replay reads; it changes nothing in dir.
		if err := writeExpect(dir, info); err != nil {
			return err
		}
	}
	return nil
}

// trimSegments cuts the zeros a segment file runs on in past its frames
// (room made ahead for appends, 256 KiB at a time), which the store reads
// as the end of its frames either way, so that the fixture stays small.
func trimSegments(dir string) error {
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, bytes.TrimRight(b, "\x00"), 0o600); err != nil {
			return err
		}
	}
	return nil
}
