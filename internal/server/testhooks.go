package server

import (
	"sync"

	"github.com/causeway-db/causeway/internal/storage"
)

// FailRaftDBWritesForTest makes every later commit of s's raft.db (raft's
// terms and votes) fail with err, as a full or failing disk fails it
// (storage.FailWritesForTest): the node stops at the first term or vote
// it must save. Only tests may call it (the test-hooks rule of
// internal/lint).
func FailRaftDBWritesForTest(s *Server, err error) {
	storage.FailWritesForTest(s.logDB, err)
}

// stopHold holds Stop, for tests, between the hand-off of the node's
// leaderships and the end of its serving (HoldStopForTest). Its zero
// value holds nothing.
type stopHold struct {
	mu      sync.Mutex
	reached chan struct{} // closed when Stop gets there
	release chan struct{} // Stop goes on once it is closed
}

// wait returns at once unless a test holds Stop here.
func (h *stopHold) wait() {
	h.mu.Lock()
	reached, release := h.reached, h.release
	h.mu.Unlock()
	if reached == nil {
		return
	}
	close(reached)
	<-release
}

// HoldStopForTest holds s's Stop once it has handed the leadership of its
// groups off and before it stops serving, as requests in flight that take
// their time hold it there (Stop lets them finish for up to
// ShutdownGrace): reached is closed when Stop gets there, and Stop goes on
// once release is called. Only tests may call it, before Stop.
func HoldStopForTest(s *Server) (reached <-chan struct{}, release func()) {
	h := &s.stopHold
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reached, h.release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	rel := h.release
	return h.reached, func() { once.Do(func() { close(rel) }) }
}
