package controller

import (
	"sort"
	"sync"
)

// RecordingSender is a Sender that keeps every request per broker, in
// order. Tests read what each broker was told; simulated brokers can be
// fed from it.
type RecordingSender struct {
	mu   sync.Mutex
	sent map[int32][]Requests
	// OnSend, if set, is called for each request set after it is recorded.
	OnSend func(Requests)
}

// NewRecordingSender returns an empty RecordingSender.
func NewRecordingSender() *RecordingSender {
	return &RecordingSender{sent: map[int32][]Requests{}}
}

// Send implements Sender.
func (s *RecordingSender) Send(r Requests) {
	s.mu.Lock()
	s.sent[r.Broker] = append(s.sent[r.Broker], r)
	cb := s.OnSend
	s.mu.Unlock()
	if cb != nil {
		cb(r)
	}
}

// Sent returns what broker b was sent so far.
func (s *RecordingSender) Sent(b int32) []Requests {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Requests(nil), s.sent[b]...)
}

// Brokers returns the brokers that were sent anything, in id order.
func (s *RecordingSender) Brokers() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, 0, len(s.sent))
	for b := range s.sent {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Reset forgets everything sent so far.
func (s *RecordingSender) Reset() {
	s.mu.Lock()
	s.sent = map[int32][]Requests{}
	s.mu.Unlock()
}
