package fsm

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestWaitApplied: WaitApplied returns at once for an index already
// applied, waits for a later one while other entries apply (a
// configuration entry moves the index too), and gives up with the
// context; AppliedChanged's channel closes when the index moves.
func TestWaitApplied(t *testing.T) {
	tf := newTestFSM(t)
	tf.commit() // an empty batch: entry 1
	ctx := context.Background()
	if err := tf.WaitApplied(ctx, 1); err != nil {
		t.Fatal(err)
	}
	idx, moved := tf.AppliedChanged()
	if idx != 1 {
		t.Fatalf("applied index %d, want 1", idx)
	}
	done := make(chan error, 1)
	go func() { done <- tf.WaitApplied(ctx, 3) }()
	tf.commit() // entry 2
	<-moved
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(3) returned %v at index 2", err)
	default:
	}
	tf.ApplyBatch([]*raft.Log{{Index: 3, Term: 1, Type: raft.LogConfiguration}})
	if err := <-done; err != nil {
		t.Fatalf("WaitApplied(3) after entry 3: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := tf.WaitApplied(short, 4); err != context.DeadlineExceeded {
		t.Fatalf("WaitApplied(4) with nothing applied: %v, want the deadline", err)
	}
}
