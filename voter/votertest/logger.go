package votertest

import (
	"strings"
	"sync"
	"testing"
)

// testLog sends log lines to t.Log, so they appear with the test that
// produced them (and only on failure or -v). Raft and transport goroutines
// can outlive the test by a moment; once closed, the writer drops their
// output instead of logging after the test completed, which testing forbids.
type testLog struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
