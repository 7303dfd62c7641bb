package shard

import (
	"context"
	"sync"
)

// verifier batches leadership confirmations: every caller waits for one
// confirmation round that starts after it arrived, and all callers that
// arrive while a round is in flight share the next one. Concurrent strong
// reads of a shard therefore cost at most two rounds in flight (one
// running, one gathering) instead of one round each, the way a read-index
// batches reads.
type verifier struct {
	round func() error // one confirmation round (a quorum answers)
	done  func(batch int)

	mu      sync.Mutex
	running bool         // REQUIRES: mu
	next    *verifyBatch // callers waiting for the next round; REQUIRES: mu
}

// verifyBatch is the callers of one round; err is valid once done closes.
type verifyBatch struct {
	n    int
	done chan struct{}
	err  error
}

// verify waits for a confirmation round that started after the call.
func (v *verifier) verify(ctx context.Context) error {
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyBatch{done: make(chan struct{})}
	}
	b := v.next
	b.n++
	if !v.running {
		v.running = true
		v.next = nil
		go v.run(b)
	}
	v.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run executes rounds until no caller is waiting.
func (v *verifier) run(b *verifyBatch) {
	for b != nil {
		b.err = v.round()
		v.mu.Lock()
		n := b.n
		v.mu.Unlock()
		if v.done != nil {
			v.done(n)
		}
		close(b.done)
		v.mu.Lock()
		b = v.next
		v.next = nil
		if b == nil {
			v.running = false
		}
		v.mu.Unlock()
	}
}
