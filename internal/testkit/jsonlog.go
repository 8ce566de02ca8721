package testkit

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// JSONLog is a Log of JSON records, one a line, that a test can search:
// for the line a refusal or a denial must leave, with the fields it must
// name.
type JSONLog struct {
	Log
}

// Logger logs into l at Info and above, as JSON.
func (l *JSONLog) Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Info, JSONFormat: true, Output: l})
}

// Records decodes every line logged so far.
func (l *JSONLog) Records(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out
}

// Find returns the records whose message starts with msg and whose
// fields hold the values given.
func (l *JSONLog) Find(t testing.TB, msg string, fields map[string]string) []map[string]any {
	t.Helper()
	var out []map[string]any
next:
	for _, rec := range l.Records(t) {
		if m, _ := rec["@message"].(string); !strings.HasPrefix(m, msg) {
			continue
		}
		for k, want := range fields {
			if Field(rec, k) != want {
				continue next
			}
		}
		out = append(out, rec)
	}
	return out
}

// Field reads a string field of a record ("" when it is not a string).
func Field(rec map[string]any, k string) string {
	s, _ := rec[k].(string)
	return s
}
