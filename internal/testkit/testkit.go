// Package testkit holds what the project's tests share: a logger that
// writes through the test, and polling for a condition.
package testkit

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Logger logs at Warn and above into t's output, so a failing test shows
// what the nodes said.
func Logger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: writer{t}})
}

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// WaitFor polls cond until it holds, failing the test once timeout has
// passed without it.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
