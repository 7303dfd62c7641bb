package shard

import (
	"sync"
	"sync/atomic"

	"github.com/causeway-db/causeway/internal/storage"
)

// CorruptForTest damages this node's replica of g's shard through
// storage.CorruptForTest: the newest version of key gets value, past the
// state machine. Only tests may call it (the test-hooks rule of
// internal/lint).
func CorruptForTest(g *Group, key, value []byte) error {
	return storage.CorruptForTest(g.deps.DB, g.id, key, value)
}

// PauseApplyForTest holds every apply of this replica (raft goes on
// storing and committing entries) until resume is called, as a replica
// whose state machine fell behind its log. Only tests may call it.
func PauseApplyForTest(g *Group) (resume func()) { return pause(&g.paused) }

// PausePublishForTest holds every batch this replica's state machine
// stores, after the state database holds it (reads see it) and before
// the state machine publishes it (HasApplied, WaitHLC, the proposer's
// answer), until resume is called. Only tests may call it.
func PausePublishForTest(g *Group) (resume func()) { return pause(&g.publishPaused) }

func pause(p *atomic.Pointer[chan struct{}]) (resume func()) {
	ch := make(chan struct{})
	p.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			p.Store(nil)
			close(ch)
		})
	}
}
