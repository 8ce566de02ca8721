package votertest

import (
	"testing"
	"time"
)

// pollInterval is how often WaitFor re-evaluates its condition. Raft events
// under FastTimeouts happen on a scale of tens of milliseconds.
const pollInterval = 10 * time.Millisecond

// WaitFor polls cond until it returns true and fails the test if that does
// not happen within timeout. what completes the sentence "timed out waiting
// for ..." in the failure message.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Eventually polls cond until it returns true or timeout passes, and reports
// whether it did. Use it where a timeout is an expected outcome.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}
