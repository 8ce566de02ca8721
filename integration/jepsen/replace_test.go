package jepsen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// The replace-voter nemesis: a voter's disk is lost, the node comes back
// formatted again under a new directory id, the quorum refuses it as the
// voter it was, and the heal replaces the old identity with the new one
// through the membership API, with the ctrlnode commands an operator
// would run.

// replacements are the voters whose disk was wiped and that wait to be
// replaced: the directory id each had before, by host.
type replacements struct {
	mu  sync.Mutex
	old map[int]string
}

// refusalTimeout bounds the wait for a wiped voter to log that it refused
// the quorum's connections meant for the voter it was.
const refusalTimeout = 20 * time.Second

// WipeDisk kills host's voter, removes what its data directory holds (a
// lossy file system's mount stays mounted), formats it to join the
// cluster with `ctrlnode format` and starts it, then waits for its log to
// say that it refused a connection meant for the old directory.
func (c *cluster) WipeDisk(ctx context.Context, host int) (string, error) {
	if err := checkHost(host); err != nil {
		return "", err
	}
	name := voterName(host)
	if err := c.crash(ctx, name); err != nil {
		return "", err
	}
	dir := voterDataDir(c.dataDir, host)
	props, err := meta.Read(dir)
	if err != nil {
		return "", fmt.Errorf("the identity of %s: %w", name, err)
	}
	c.replace.mu.Lock()
	if c.replace.old == nil {
		c.replace.old = map[int]string{}
	}
	if _, pending := c.replace.old[host]; !pending {
		c.replace.old[host] = props.DirectoryID.String()
	}
	old := c.replace.old[host]
	c.replace.mu.Unlock()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return "", fmt.Errorf("wipe %s: %w", dir, err)
		}
	}
	if out, err := c.ctrlnode(ctx, "format", "--node-id", strconv.Itoa(int(voterID(host))), "--data-dir", dir, "--cluster-id", props.ClusterID); err != nil {
		return "", fmt.Errorf("format %s again: %w: %s", dir, err, out)
	}
	fresh, err := meta.Read(dir)
	if err != nil {
		return "", err
	}
	logStart := logSize(c.procs.logPath(name))
	if err := c.restart(name); err != nil {
		return "", err
	}
	want := []byte("this_directory=" + fresh.DirectoryID.String())
	why := waitUntil(refusalTimeout, func() string {
		b, _ := os.ReadFile(c.procs.logPath(name))
		if int64(len(b)) > logStart && bytes.Contains(b[logStart:], []byte("refused a raft connection meant for another directory")) && bytes.Contains(b[logStart:], want) {
			return ""
		}
		return "no refusal logged"
	})
	report := fmt.Sprintf("directory %s wiped, formatted again as %s", old, fresh.DirectoryID)
	if why != "" {
		return report, fmt.Errorf("%s: the node did not log within %s that it refused the quorum's connections meant for its old directory", report, refusalTimeout)
	}
	return report + "; the node refused the quorum's connections meant for the old directory", nil
}

// ReplaceVoter removes host's voter of its directory before the wipe and
// adds the node under its new one: `ctrlnode quorum remove-voter` and
// `add-voter`. A removal answered VOTER_NOT_FOUND or an add answered
// DUPLICATE_VOTER was done by an earlier attempt.
func (c *cluster) ReplaceVoter(ctx context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	c.replace.mu.Lock()
	old, pending := c.replace.old[host]
	c.replace.mu.Unlock()
	if !pending {
		return nil
	}
	fresh, err := meta.Read(voterDataDir(c.dataDir, host))
	if err != nil {
		return err
	}
	id := strconv.Itoa(int(voterID(host)))
	bootstrap := strings.Join(c.layout.listeners(), ",")
	if out, err := c.ctrlnode(ctx, "quorum", "remove-voter", "--id", id, "--directory-id", old, "--bootstrap", bootstrap, "--timeout", "12s"); err != nil &&
		!strings.Contains(out, "VOTER_NOT_FOUND") {
		return fmt.Errorf("remove voter %s of directory %s: %w: %s", id, old, err, out)
	}
	if out, err := c.ctrlnode(ctx, "quorum", "add-voter", "--id", id, "--directory-id", fresh.DirectoryID.String(),
		"--raft", c.layout.addr(host, offRaft), "--listener", c.layout.addr(host, offListener), "--bootstrap", bootstrap,
		"--timeout", "15s", "--progress", "0"); err != nil && !strings.Contains(out, "DUPLICATE_VOTER") {
		return fmt.Errorf("add voter %s of directory %s: %w: %s", id, fresh.DirectoryID, err, out)
	}
	c.replace.mu.Lock()
	delete(c.replace.old, host)
	c.replace.mu.Unlock()
	return nil
}

// ctrlnode runs the run's binary to completion and returns its output.
func (c *cluster) ctrlnode(ctx context.Context, args ...string) (string, error) {
	if c.procs.bin == "" {
		return "", errors.New("no ctrlnode binary")
	}
	out, err := exec.CommandContext(ctx, c.procs.bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
