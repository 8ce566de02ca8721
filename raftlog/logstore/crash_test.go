package logstore

import (
	"os"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/logcrash"
)

// The crash test runs this test binary again as the writer process, which
// the test kills with SIGKILL (see logcrash).
const crashWriterEnv = "LOGSTORE_CRASH_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashWriterEnv); dir != "" {
		s, err := Open(dir, Options{SegmentBytes: 16 << 10})
		if err != nil {
			logcrash.Exit("open", err)
		}
		logcrash.Write(s, entry)
		return
	}
	os.Exit(m.Run())
}

func TestKilledWriterLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	logcrash.Run(t, logcrash.Test{
		Env:    crashWriterEnv + "=" + dir,
		Rounds: 8,
		KillAt: func(round int) int { return 300 + round*170 },
		Open: func() (raft.LogStore, func() error, error) {
			s, err := Open(dir, Options{SegmentBytes: 16 << 10})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		Entry: entry,
	})
}
