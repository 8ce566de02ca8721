package sender

// Delivery marks: what each broker has acknowledged, for callers that
// must not answer a change before the brokers have applied it (the
// controller node's read-your-writes wait). A broker's mark counts the
// request sets handed to Send for it; the broker reaches a mark once
// every set up to it was answered (applied or refused), or dropped
// because it could never be delivered (an older epoch or incarnation, a
// broker no longer registered). Sets are finished in order, merged sets
// at once, so one number per broker says it all.

// Marks returns the mark of each broker given that has sets not yet
// finished with: what it must reach to have acknowledged everything
// handed to Send so far. A broker with nothing outstanding is left out.
func (p *Pool) Marks(brokers []int32) map[int32]uint64 {
	var out map[int32]uint64
	for _, id := range brokers {
		p.mu.Lock()
		b := p.brokers[id]
		p.mu.Unlock()
		if b == nil {
			continue
		}
		b.mu.Lock()
		handed, done := b.handed, b.done
		b.mu.Unlock()
		if done < handed {
			if out == nil {
				out = map[int32]uint64{}
			}
			out[id] = handed
		}
	}
	return out
}

// Reached reports whether a broker has finished with every set up to
// mark (see Marks). After Close every mark counts as reached: nothing
// will be delivered any more.
func (p *Pool) Reached(broker int32, mark uint64) bool {
	p.mu.Lock()
	b, closed := p.brokers[broker], p.closed
	p.mu.Unlock()
	if b == nil || closed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done >= mark
}

// Progress returns a channel closed the next time some broker reaches a
// new mark, or the pool closes.
func (p *Pool) Progress() <-chan struct{} {
	p.progressMu.Lock()
	defer p.progressMu.Unlock()
	if p.progressEnded {
		return closedChan
	}
	if p.progress == nil {
		p.progress = make(chan struct{})
	}
	return p.progress
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// finished records that the broker is done with the sets up to mark.
func (b *brokerSender) finished(mark uint64) {
	b.mu.Lock()
	moved := mark > b.done
	b.done = max(b.done, mark)
	b.mu.Unlock()
	if moved {
		b.p.progressed()
	}
}

func (p *Pool) progressed() {
	p.progressMu.Lock()
	p.progressEnded = p.progressEnded || p.ctx.Err() != nil
	if p.progress != nil {
		close(p.progress)
		p.progress = nil
	}
	p.progressMu.Unlock()
}
