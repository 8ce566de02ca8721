package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func decodeControlLog(t *testing.T, body string) []ControlLogEntry {
	t.Helper()
	var out []ControlLogEntry
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var e ControlLogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestControlLogHandler: every record as a JSON line that decodes back to
// the agent's record; after= leaves out what a poller already has, unless
// the agent is another incarnation than the one the poller names.
func TestControlLogHandler(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	var id rl.TopicID
	id[0], id[15] = 0x12, 0xef
	recs := []broker.ControlRecord{
		{Seq: 1, At: at, Key: broker.KeyLeaderAndIsr, ControllerID: 1002, ControllerEpoch: 3, BrokerEpoch: 9, MetadataOffset: 40, Partition: -1, Accepted: true},
		{Seq: 2, At: at, Key: broker.KeyLeaderAndIsr, ControllerID: 1002, ControllerEpoch: 3, BrokerEpoch: 9, MetadataOffset: 40, Partition: 1,
			Topic: "t", TopicID: id, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 5, ISR: []int32{2, 3}, Accepted: true},
		{Seq: 3, At: at, Key: broker.KeyStopReplica, ControllerEpoch: 2, Partition: -1, ErrorCode: 11},
	}
	h := controlLogHandler(4, "abcd", func() []broker.ControlRecord { return recs })
	get := func(url string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		return rec
	}

	w := get("/control-log")
	if w.Code != 200 || w.Header().Get("X-Broker-Id") != "4" || w.Header().Get("X-Incarnation") != "abcd" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	got := decodeControlLog(t, w.Body.String())
	if len(got) != 3 {
		t.Fatalf("%d lines:\n%s", len(got), w.Body)
	}
	for i, e := range got {
		if e.Broker != 4 || e.Incarnation != "abcd" {
			t.Errorf("line %d: broker %d incarnation %q", i, e.Broker, e.Incarnation)
		}
		if back := e.Record(); !reflect.DeepEqual(back, recs[i]) {
			t.Errorf("line %d decodes to\n%+v\nwant\n%+v", i, back, recs[i])
		}
	}
	if got[1].TopicID != id.String() {
		t.Errorf("topic id %q, want %q", got[1].TopicID, id)
	}

	if got := decodeControlLog(t, get("/control-log?after=2").Body.String()); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("after=2: %+v", got)
	}
	if got := decodeControlLog(t, get("/control-log?after=2&incarnation=abcd").Body.String()); len(got) != 1 {
		t.Errorf("after=2 of the same incarnation: %+v", got)
	}
	if got := decodeControlLog(t, get("/control-log?after=2&incarnation=0000").Body.String()); len(got) != 3 {
		t.Errorf("after=2 of another incarnation: %d records, want all 3", len(got))
	}
	if w := get("/control-log?after=soon"); w.Code != http.StatusBadRequest {
		t.Errorf("after=soon: %d", w.Code)
	}
}

// TestWithControlLog: the route is mounted in front of the endpoint of a
// node with a broker agent, and only there.
func TestWithControlLog(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	a, err := broker.Start(broker.Config{BrokerID: 7, Listener: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := &Server{Agent: a}
	do := func(h http.Handler, method, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Code
	}
	h := s.withControlLog(inner)
	if c := do(h, http.MethodGet, "/control-log"); c != 200 {
		t.Errorf("GET /control-log with an agent: %d", c)
	}
	if c := do(h, http.MethodPost, "/control-log"); c == 200 {
		t.Error("POST /control-log was served: the route is read-only")
	}
	if c := do(h, http.MethodGet, "/metrics"); c != http.StatusTeapot {
		t.Errorf("other paths do not reach the endpoint: %d", c)
	}
	if c := do((&Server{}).withControlLog(inner), http.MethodGet, "/control-log"); c != http.StatusTeapot {
		t.Errorf("a node without an agent serves /control-log itself: %d", c)
	}
}
