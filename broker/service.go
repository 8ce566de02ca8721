package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Versions is the range of versions of one API key served.
type Versions struct{ Min, Max int16 }

// Service is a set of Kafka APIs that the broker embedding the agent
// serves on the agent's listener beside the agent's own: its data path
// (Produce, Fetch, ListOffsets, …). Clients, controllers and follower
// replicas then share one port, as on a Kafka broker. ApiVersions
// advertises the Service's APIs with the agent's; a key the agent serves
// itself stays the agent's. Handle may return a nil response with a nil
// error for a request that gets no answer (Produce with acks=0).
type Service interface {
	kafkawire.Handler
	APIs() map[int16]Versions
}

// serviceHandler routes a listener's requests: the Service's keys to it,
// everything else to the agent.
type serviceHandler struct {
	a    *Agent
	svc  Service
	keys map[int16]bool
}

func (h *serviceHandler) Handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	if h.keys[req.Key()] {
		return h.svc.Handle(ctx, c, req)
	}
	return h.a.Handle(ctx, c, req)
}

// withService adds the Service's APIs to the listener's configuration.
func (a *Agent) withService(wc *kafkawire.Config) {
	svc := a.cfg.Service
	if svc == nil {
		return
	}
	h := &serviceHandler{a: a, svc: svc, keys: map[int16]bool{}}
	apis := make(map[int16]int16, len(wc.APIs))
	for k, v := range wc.APIs {
		apis[k] = v
	}
	for k, v := range svc.APIs() {
		if _, mine := apis[k]; mine {
			continue
		}
		h.keys[k] = true
		apis[k] = v.Max
		if v.Min > 0 {
			if wc.MinVersions == nil {
				wc.MinVersions = map[int16]int16{}
			}
			wc.MinVersions[k] = v.Min
		}
	}
	wc.APIs, wc.Handler = apis, h
}
