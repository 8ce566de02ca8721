// Package ops is a node's operations endpoint over HTTP:
//
//	/metrics        Prometheus metrics (see package metrics)
//	/healthz        200 while the process serves HTTP
//	/readyz         200 once this node has applied the committed log and,
//	                if it is a voter, knows a raft leader; and every extra
//	                check passes (a broker agent: registered). 503 with the
//	                reasons otherwise
//	/state-hash     {"node":…, "index":…, "hash":"…"}: the SHA-256 of this
//	                voter's image and the log index it was taken at
//	/brokers        the registered brokers as this voter's image has them,
//	                with fenced and in-controlled-shutdown flags
//	/partitions     each partition's state, leader, ISR and every replica's
//	                state (?topic=T for one topic)
//	/state-changes  the voter's state-change log as JSON lines, filtered by
//	                ?topic= &partition= &broker= &since=INDEX; &follow=1
//	                keeps the answer open and streams each new line
//	/debug/pprof/   Go's profiler, only when Config.Pprof is set
//
// Every answer but /metrics and pprof is JSON.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/fsm/statelog"
)

// Check is an extra readiness condition: nil when satisfied, otherwise an
// error saying what is missing.
type Check func() error

// Config configures the handler.
type Config struct {
	// NodeID names this node in answers.
	NodeID int32
	// Node is the controller voter of this process, nil for a process
	// without one (then /state-hash and /brokers answer 404).
	Node *controller.Node
	// Gatherer serves /metrics; nil serves prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Checks are extra readiness conditions.
	Checks []Check
	// Pprof mounts net/http/pprof under /debug/pprof/.
	Pprof bool
	// ApplyWait bounds how long /readyz waits for the image to reach the
	// commit index it read. Default 500 ms.
	ApplyWait time.Duration
	// StateLog is the voter's state-change log that /state-changes
	// serves; nil answers 404.
	StateLog *statelog.Log
}

// StateHash is the answer of /state-hash.
type StateHash struct {
	Node            int32  `json:"node"`
	Index           uint64 `json:"index"`
	Hash            string `json:"hash"`
	ControllerEpoch int32  `json:"controller_epoch"`
}

// Broker is one entry of /brokers.
type Broker struct {
	ID           int32      `json:"id"`
	Epoch        int64      `json:"epoch"`
	Rack         string     `json:"rack,omitempty"`
	Fenced       bool       `json:"fenced"`
	ShuttingDown bool       `json:"shutting_down"`
	Endpoints    []Endpoint `json:"endpoints"`
}

// Endpoint is a broker's listener.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Brokers is the answer of /brokers.
type Brokers struct {
	Node    int32    `json:"node"`
	Index   uint64   `json:"index"`
	Brokers []Broker `json:"brokers"`
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Node    int32    `json:"node"`
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons,omitempty"`
}

// Handler returns the endpoint's handler.
func Handler(cfg Config) http.Handler {
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.ApplyWait <= 0 {
		cfg.ApplyWait = 500 * time.Millisecond
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"node": cfg.NodeID, "status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := Ready(r.Context(), cfg)
		code := http.StatusOK
		if !rd.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rd)
	})
	mux.HandleFunc("GET /state-hash", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Node == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "this node is not a controller voter"})
			return
		}
		h, idx := cfg.Node.FSM.StateHash()
		var epoch int32
		cfg.Node.FSM.View(func(im *fsm.Image) { epoch, _ = im.ControllerEpoch() })
		writeJSON(w, http.StatusOK, StateHash{Node: cfg.NodeID, Index: idx, Hash: h.String(), ControllerEpoch: epoch})
	})
	mux.HandleFunc("GET /brokers", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Node == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "this node is not a controller voter"})
			return
		}
		writeJSON(w, http.StatusOK, ReadBrokers(cfg.NodeID, cfg.Node.FSM))
	})
	mux.HandleFunc("GET /partitions", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Node == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "this node is not a controller voter"})
			return
		}
		writeJSON(w, http.StatusOK, ReadPartitions(cfg.NodeID, cfg.Node.FSM, r.URL.Query().Get("topic")))
	})
	mux.HandleFunc("GET /state-changes", func(w http.ResponseWriter, r *http.Request) {
		serveStateChanges(w, r, cfg.StateLog)
	})
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// ReadBrokers lists the brokers of f's image.
func ReadBrokers(node int32, f *fsm.FSM) Brokers {
	out := Brokers{Node: node, Brokers: []Broker{}}
	f.View(func(im *fsm.Image) {
		out.Index = im.AppliedIndex()
		for _, b := range im.Brokers() {
			ob := Broker{ID: b.ID, Epoch: b.Epoch, Rack: b.Rack, Fenced: b.Fenced, ShuttingDown: b.ShuttingDown, Endpoints: []Endpoint{}}
			for _, e := range b.Endpoints {
				ob.Endpoints = append(ob.Endpoints, Endpoint{Name: e.Name, Host: e.Host, Port: int(e.Port)})
			}
			out.Brokers = append(out.Brokers, ob)
		}
	})
	return out
}

// Ready evaluates the readiness conditions.
func Ready(ctx context.Context, cfg Config) Readiness {
	rd := Readiness{Node: cfg.NodeID}
	if n := cfg.Node; n != nil {
		if err := n.FSM.Halted(); err != nil {
			rd.Reasons = append(rd.Reasons, "state machine halted: "+err.Error())
		}
		r := n.Voter.Raft()
		if _, id := r.LeaderWithID(); id == "" {
			rd.Reasons = append(rd.Reasons, "no raft leader known")
		} else {
			commit := r.CommitIndex()
			if err := waitApplied(ctx, n.FSM, commit, cfg.ApplyWait); err != nil {
				rd.Reasons = append(rd.Reasons, err.Error())
			}
		}
	}
	for _, c := range cfg.Checks {
		if err := c(); err != nil {
			rd.Reasons = append(rd.Reasons, err.Error())
		}
	}
	rd.Ready = len(rd.Reasons) == 0
	return rd
}

func waitApplied(ctx context.Context, f *fsm.FSM, commit uint64, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		applied := f.AppliedIndex()
		if applied >= commit {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("image at index %d, behind the commit index %d", applied, commit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Server is a running endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr (host:port; port 0 picks one) and serves h.
func Serve(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed; Close reports nothing more useful
		}
	}()
	return s, nil
}

// Addr is the bound host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the bound port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// Close stops the server, letting requests in flight finish for up to 2 s.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}
