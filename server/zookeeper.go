package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/zookeeper"
)

// startMirror starts writing Kafka's znodes to cfg.ZooKeeperMirror. The
// mirror writes only while this voter is the controller of record.
func (s *Server) startMirror() error {
	m, err := zookeeper.StartMirror(zookeeper.MirrorConfig{Addr: s.cfg.ZooKeeperMirror, Node: s.Node, Logger: s.log})
	if err != nil {
		return err
	}
	s.Mirror = m
	return nil
}

// MigrateAnswer is the JSON answer of POST /migrate.
type MigrateAnswer struct {
	Node   int32           `json:"node"`
	Active bool            `json:"active"`
	Error  string          `json:"error,omitempty"`
	Plan   *zookeeper.Plan `json:"plan,omitempty"`
	Text   string          `json:"text,omitempty"`
}

// withMigrate adds POST /migrate?zookeeper=HOST:PORT[&dry_run=true] to a
// voter's HTTP endpoint: the import of a ZooKeeper-mode cluster runs on the
// active controller, which is the only node that can commit it. A
// standby answers 409 so the caller tries the next voter.
func (s *Server) withMigrate(h http.Handler) http.Handler {
	if s.Node == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("POST /migrate", func(w http.ResponseWriter, r *http.Request) {
		ans := MigrateAnswer{Node: s.cfg.NodeID}
		w.Header().Set("Content-Type", "application/json")
		zk := r.URL.Query().Get("zookeeper")
		if zk == "" {
			ans.Error = "query parameter zookeeper (host:port[/chroot]) is required"
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(ans)
			return
		}
		if ans.Active, _ = s.Node.Controller.Active(); !ans.Active {
			ans.Error = "not the active controller"
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(ans)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
		defer cancel()
		plan, err := zookeeper.Migrate(ctx, zk, s.Node, r.URL.Query().Get("dry_run") == "true", s.log)
		ans.Plan, ans.Text = &plan, plan.String()
		if err != nil {
			ans.Error = err.Error()
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		_ = json.NewEncoder(w).Encode(ans)
	})
	return mux
}
