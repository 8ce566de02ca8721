package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// Read your writes. Once an admin change is answered, a read of it from
// any node of the cluster sees it. Two waits make it so, both decided
// here and bounded by the caller's context (the request's timeout):
//
//   - Before answering a change, the active controller waits until every
//     live broker has acknowledged the control requests handed to the
//     sender so far (AwaitBrokers). A change's requests are handed over
//     in the round that commits it, before its callers are answered, so
//     a broker that serves Metadata has applied the change by then. A
//     broker that is fenced meanwhile is no longer waited for; one that
//     stays live and silent holds the answer until the timeout.
//   - A voter that is not the active controller answers a read from its
//     own image only once that image holds what the active controller
//     had applied when the read arrived (AwaitRead): it asks the active
//     voter for its applied index (a read-index round trip; hashicorp/raft
//     has no follower read index). Until it does, the read is answered by
//     the active controller. The active voter's image holds every change
//     it answered, and a new active voter's activation waits for its
//     image to hold what the previous one committed.

// DeliveryTracker is a Sender that knows what each broker acknowledged
// (transport/sender.Pool is one). See AwaitBrokers.
type DeliveryTracker interface {
	// Marks returns, for each broker given with requests not yet
	// acknowledged, the mark it reaches once it has acknowledged
	// everything handed to the sender so far.
	Marks(brokers []int32) map[int32]uint64
	// Reached reports whether a broker reached a mark.
	Reached(broker int32, mark uint64) bool
	// Progress returns a channel closed when some broker next reaches a
	// mark.
	Progress() <-chan struct{}
}

// BrokersBehindError is returned by AwaitBrokers when its context ended
// with live brokers that had not acknowledged what they were sent.
type BrokersBehindError struct {
	Brokers []int32
	Err     error
}

func (e *BrokersBehindError) Error() string {
	return fmt.Sprintf("brokers %v have not acknowledged the metadata they were sent: %v", e.Brokers, e.Err)
}

func (e *BrokersBehindError) Unwrap() error { return e.Err }

// AwaitBrokers waits until every live broker has acknowledged the
// control requests handed to the sender so far, or ctx ends. It returns
// at once on a node that is not the active controller, or whose sender
// does not track deliveries.
func (n *Node) AwaitBrokers(ctx context.Context) error {
	t, ok := n.sender.(DeliveryTracker)
	if !ok {
		return nil
	}
	if active, _ := n.Controller.Active(); !active {
		return nil
	}
	marks := t.Marks(liveBrokerIDs(n.FSM))
	for len(marks) > 0 {
		// Take both wake-ups before looking, so that no change between
		// the look and the wait goes unnoticed.
		progress := t.Progress()
		_, changed := n.FSM.AppliedChanged()
		live := liveBrokerIDs(n.FSM)
		for id, m := range marks {
			if !slices.Contains(live, id) || t.Reached(id, m) {
				delete(marks, id)
			}
		}
		if len(marks) == 0 {
			return nil
		}
		select {
		case <-progress:
		case <-changed:
		case <-ctx.Done():
			behind := make([]int32, 0, len(marks))
			for id := range marks {
				behind = append(behind, id)
			}
			slices.Sort(behind)
			return &BrokersBehindError{Brokers: behind, Err: ctx.Err()}
		}
	}
	return nil
}

// liveBrokerIDs lists the registered, unfenced brokers of the image.
func liveBrokerIDs(f *fsm.FSM) []int32 {
	var out []int32
	f.View(func(im *fsm.Image) {
		for _, b := range im.Brokers() {
			if b.Live() {
				out = append(out, b.ID)
			}
		}
	})
	return out
}

// ErrNoReadIndex is returned by AwaitRead when no active controller
// could be asked for its read index.
var ErrNoReadIndex = errors.New("no active controller answered for its read index")

// ReadIndexSource asks the active controller for its ReadIndex. The
// Kafka listener provides it (it knows how to reach the other voters).
type ReadIndexSource func(ctx context.Context) (uint64, error)

// readIndexSource is the node's ReadIndexSource, set once by the
// listener.
type readIndexSource struct {
	mu  sync.Mutex
	ask ReadIndexSource
}

// SetReadIndexSource sets how a standby asks the active controller for
// its read index (see AwaitRead).
func (n *Node) SetReadIndexSource(ask ReadIndexSource) {
	n.readIndex.mu.Lock()
	n.readIndex.ask = ask
	n.readIndex.mu.Unlock()
}

// ReadIndex is what a read arriving now needs a voter to have applied:
// the active controller's applied index, which holds every change it
// answered. Only the active controller answers it (ErrNotController
// elsewhere).
func (n *Node) ReadIndex() (uint64, error) {
	if active, _ := n.Controller.Active(); !active {
		return 0, ErrNotController
	}
	return n.FSM.AppliedIndex(), nil
}

// ReadBehindError is AwaitRead's answer on a voter whose image does not
// yet hold what the active controller had applied when the read
// arrived: the read is answered fresh by the active controller, or here
// once the image reaches Index (FSM.WaitApplied).
type ReadBehindError struct {
	Index, Applied uint64
}

func (e *ReadBehindError) Error() string {
	return fmt.Sprintf("this voter has applied up to %d, the active controller's read index is %d", e.Applied, e.Index)
}

// AwaitRead tells whether this voter's image can answer a read arriving
// now with every change the cluster had answered: at once on the active
// controller; after activation on a raft leader still activating; on any
// other voter when its image holds the active controller's read index,
// asked of it (a *ReadBehindError when it does not yet: a follower
// learns that entries committed up to raft's CommitTimeout after they
// did, so rather than wait the read is better answered by the active
// controller). ctx bounds the round trip.
func (n *Node) AwaitRead(ctx context.Context) error {
	if active, _ := n.Controller.Active(); active {
		return nil
	}
	if n.Voter.IsLeader() {
		if err := n.Controller.WaitReady(ctx); err == nil || !errors.Is(err, ErrNotController) {
			return err
		}
		// Leadership moved on meanwhile: ask the new active voter.
	}
	n.readIndex.mu.Lock()
	ask := n.readIndex.ask
	n.readIndex.mu.Unlock()
	if ask == nil {
		return ErrNoReadIndex
	}
	idx, err := ask(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoReadIndex, err)
	}
	if applied := n.FSM.AppliedIndex(); applied < idx {
		return &ReadBehindError{Index: idx, Applied: applied}
	}
	return nil
}
