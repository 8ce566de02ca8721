package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir/datadirtest"
)

// sampleDir writes a sample data directory with its log in store: a
// voter that committed records of every kind, with a snapshot part way.
func sampleDir(t *testing.T, store string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := datadirtest.Write(dir, raftlog.LogStore(store)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ctrlnodeRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestLogDumpAndVerify runs log dump and log verify on a real data
// directory of each log store, then on one with a damaged entry: verify
// exits 1 naming the entry's index.
func TestLogDumpAndVerify(t *testing.T) {
	for _, store := range []string{"segments", "wal", "bolt"} {
		dir := sampleDir(t, store)
		code, out, errs := ctrlnodeRun("log", "dump", "--data-dir", dir)
		for _, want := range []string{"SNAPSHOT", "INDEX  TERM", "LogConfiguration", "RegisterBroker", "BrokerID=2",
			"Topic", `Name=orders`, "ScramCredential", "Salt=redacted-16-bytes", "AclChange", "BeginDeleteTopic"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: dump lacks %q (exit %d, stderr %s)\n%s", store, want, code, errs, out)
			}
		}
		if code != 0 || strings.Contains(out, "StoredKey=AA") {
			t.Fatalf("%s: dump exit %d (or printed a SCRAM key): %s", store, code, errs)
		}
		code, out, _ = ctrlnodeRun("log", "dump", "--data-dir", dir, "--json", "--no-snapshots", "--from", "3", "--to", "3")
		var e struct {
			Index   uint64 `json:"index"`
			Records []struct {
				Type string `json:"type"`
			} `json:"records"`
		}
		if err := json.Unmarshal([]byte(out), &e); code != 0 || err != nil || e.Index != 3 || len(e.Records) == 0 {
			t.Fatalf("%s: dump --json of index 3: exit %d, %v: %s", store, code, err, out)
		}
		code, out, _ = ctrlnodeRun("log", "verify", "--data-dir", dir)
		if code != 0 || !strings.Contains(out, "log in "+store+", 23 entries (1 to 23)") || !strings.HasSuffix(out, "ok\n") {
			t.Fatalf("%s: verify: exit %d\n%s", store, code, out)
		}
	}

	dir := sampleDir(t, "segments")
	seg := filepath.Join(dir, "log", "00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[300] ^= 0xff // inside an early entry: later appends follow it
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := ctrlnodeRun("log", "verify", "--data-dir", dir, "--json")
	var r struct {
		OK       bool `json:"ok"`
		Problems []struct {
			Index uint64 `json:"index"`
			Error string `json:"error"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.OK || len(r.Problems) != 1 || r.Problems[0].Index == 0 ||
		!strings.Contains(r.Problems[0].Error, "damaged at offset") {
		t.Fatalf("verify of a damaged log: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = ctrlnodeRun("log", "verify", "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "PROBLEM: index ") {
		t.Fatalf("verify of a damaged log: exit %d: %s", code, out)
	}
	if code, _, _ := ctrlnodeRun("log", "verify"); code != 2 {
		t.Fatalf("verify without --data-dir: exit %d, want 2", code)
	}
}
