package fsm

import "context"

// appliedSignal wakes the readers waiting for the applied index to move:
// its channel is closed, and replaced, each time it does. The zero value
// is ready to use.
type appliedSignal struct {
	ch chan struct{}
}

// current is the channel the next move closes. Callers hold the FSM's
// lock (either kind for current, the write lock for moved).
func (s *appliedSignal) current() chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *appliedSignal) moved() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// WaitApplied waits until the image has applied the entry at index (or a
// later one, or a snapshot past it), or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		if f.img.appliedIndex >= index {
			f.mu.Unlock()
			return nil
		}
		ch := f.applied.current()
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AppliedChanged returns the applied index and a channel closed when it
// next moves (an entry applied or a snapshot restored).
func (f *FSM) AppliedChanged() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img.appliedIndex, f.applied.current()
}
