package ops

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestHandlerWithoutVoter: a process without a voter is healthy, ready
// when its checks pass, and has no state hash; pprof is off by default.
func TestHandlerWithoutVoter(t *testing.T) {
	registered := false
	h := Handler(Config{NodeID: 7, Gatherer: prometheus.NewRegistry(), Checks: []Check{func() error {
		if !registered {
			return errors.New("broker 7 not registered")
		}
		return nil
	}}})
	do := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := do("/healthz"); rec.Code != 200 {
		t.Fatalf("/healthz = %d", rec.Code)
	}
	rec := do("/readyz")
	var rd Readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &rd); err != nil || rec.Code != 503 || rd.Ready || len(rd.Reasons) != 1 || rd.Reasons[0] != "broker 7 not registered" {
		t.Fatalf("/readyz before registration = %d %s", rec.Code, rec.Body)
	}
	registered = true
	if rec := do("/readyz"); rec.Code != 200 {
		t.Fatalf("/readyz after registration = %d %s", rec.Code, rec.Body)
	}
	for _, p := range []string{"/state-hash", "/brokers"} {
		if rec := do(p); rec.Code != 404 {
			t.Errorf("%s without a voter = %d, want 404", p, rec.Code)
		}
	}
	if rec := do("/debug/pprof/"); rec.Code != 404 {
		t.Errorf("pprof answers %d without Config.Pprof", rec.Code)
	}
	if rec := do("/metrics"); rec.Code != 200 {
		t.Errorf("/metrics = %d", rec.Code)
	}
}
