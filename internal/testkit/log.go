package testkit

import (
	"bytes"
	"strings"
	"sync"
)

// Log is a log sink safe for concurrent writers that a test reads back:
// give it to hclog as Output.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Has reports whether one line holds every part.
func (l *Log) Has(parts ...string) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
