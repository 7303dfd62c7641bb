package shard

import (
	"sync"

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
func PauseApplyForTest(g *Group) (resume func()) {
	ch := make(chan struct{})
	g.paused.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			g.paused.Store(nil)
			close(ch)
		})
	}
}
