package voter

// notifyBuffer is the capacity of the channel raft writes leadership changes
// to. The forwarder empties it continuously; the buffer only absorbs bursts
// (a quick lose/regain) so raft's send never waits on the forwarder's
// scheduling.
const notifyBuffer = 16

// leaderForwarder drains raft's NotifyCh and keeps the latest value in out,
// a channel of capacity one. Only the forwarder sends on out, so after it
// empties a full out the next send cannot block.
type leaderForwarder struct {
	in   chan bool
	out  chan bool
	stop chan struct{}
	done chan struct{}
}

func newLeaderForwarder() *leaderForwarder {
	f := &leaderForwarder{
		in:   make(chan bool, notifyBuffer),
		out:  make(chan bool, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go f.run()
	return f
}

func (f *leaderForwarder) run() {
	defer close(f.done)
	defer close(f.out)
	for {
		select {
		case v := <-f.in:
			f.publish(v)
		case <-f.stop:
			// Raft has stopped; pass on what it sent while stopping (its
			// final "not leader") before closing out.
			for {
				select {
				case v := <-f.in:
					f.publish(v)
				default:
					return
				}
			}
		}
	}
}

func (f *leaderForwarder) publish(v bool) {
	select {
	case f.out <- v:
		return
	default:
	}
	// out holds a stale value nobody has read yet: replace it.
	select {
	case <-f.out:
	default:
	}
	f.out <- v
}

// close stops the forwarder once raft can no longer send, and waits for it.
func (f *leaderForwarder) close() {
	close(f.stop)
	<-f.done
}
