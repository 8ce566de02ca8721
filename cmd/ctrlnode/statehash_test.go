package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStateHashHonoursBootstrap: state-hash reads dev mode's HTTP
// endpoints only while --bootstrap is dev mode's; another --bootstrap
// without --http is a usage error naming --http, not a silent read of the
// dev addresses.
func TestStateHashHonoursBootstrap(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runStateHash([]string{"--bootstrap", "10.9.8.7:9092", "--wait", "0s"}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "10.9.8.7:9092") || !strings.Contains(errOut.String(), "--http") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming --bootstrap and --http", code, errOut.String(), exitUsage)
	}
	if out.Len() != 0 {
		t.Fatalf("printed %q", out.String())
	}
}
