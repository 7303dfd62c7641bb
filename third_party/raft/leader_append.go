// Causeway's copy (FORK.md, change 4): a leader's append in parallel with
// replication.

package raft

import (
	"sync"
	"sync/atomic"
)

// LeaderMatchBeforeStore makes a leader that appends in parallel
// (Config.ParallelLeaderAppend) count its own copy of new entries toward
// the commit quorum when it dispatches them, before they are durable in its
// log store. Tests turn it on, before any Raft starts, to show what waiting
// for the store guards (Causeway's guard leader-append); never turn it on
// otherwise: an entry could then commit, and its write be acknowledged,
// with fewer durable copies than a quorum.
var LeaderMatchBeforeStore = false

// leaderAppend writes a leader's new entries to its log store in the
// background, so that its fsync overlaps the followers' (Raft thesis
// §10.2.1; etcd's leader does the same). The entries are readable by
// replication (getLog) from the moment they are dispatched, and the
// leader counts its own copy toward the commit quorum only once the store
// returned, that is once they are durable. One per term of leadership.
type leaderAppend struct {
	r          *Raft
	commitment *commitment
	localID    ServerID

	mu      sync.Mutex
	pending []*Log // dispatched and not yet stored, in index order

	wake     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	failed atomic.Bool // a store failed: the leader steps down
}

func newLeaderAppend(r *Raft, c *commitment, stepDown chan struct{}) *leaderAppend {
	a := &leaderAppend{
		r: r, commitment: c, localID: r.localID,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go a.run(stepDown)
	return a
}

// add makes logs readable and queues them for the store. Called by the
// leader loop before it sets its last log to them.
func (a *leaderAppend) add(logs []*Log) {
	a.mu.Lock()
	a.pending = append(a.pending, logs...)
	a.mu.Unlock()
	if LeaderMatchBeforeStore {
		a.commitment.match(a.localID, logs[len(logs)-1].Index)
	}
	asyncNotifyCh(a.wake)
}

// get copies the pending entry at index into out, if there is one.
func (a *leaderAppend) get(index uint64, out *Log) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return false
	}
	first := a.pending[0].Index
	if index < first || index-first >= uint64(len(a.pending)) {
		return false
	}
	*out = *a.pending[index-first]
	return true
}

func (a *leaderAppend) run(stepDown chan struct{}) {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
			if !a.flush() {
				asyncNotifyCh(stepDown)
			}
		case <-a.stop:
			a.flush()
			return
		}
	}
}

// flush stores every pending entry, in batches of what was dispatched
// meanwhile (the log store's group commit takes them with one fsync). It
// reports false once a store failed.
func (a *leaderAppend) flush() bool {
	for !a.failed.Load() {
		a.mu.Lock()
		batch := a.pending
		a.mu.Unlock()
		if len(batch) == 0 {
			return true
		}
		if err := a.r.logs.StoreLogs(batch); err != nil {
			a.r.logger.Error("failed to commit logs", "error", err)
			a.failed.Store(true)
			a.r.leaderStoreFailed.Store(true)
			return false
		}
		a.r.storedAsLeader()
		a.mu.Lock()
		if a.pending = a.pending[len(batch):]; len(a.pending) == 0 {
			a.pending = nil
		}
		a.mu.Unlock()
		a.commitment.match(a.localID, batch[len(batch)-1].Index)
	}
	return false
}

// close stores what is still pending (unless a store failed) and stops
// the writer. After it, every dispatched entry is in the log store, or
// the store failed.
func (a *leaderAppend) close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
}

// stopParallelAppend ends a leader's background log writer, once every
// entry it was given is stored (or a store failed: the last log is then
// set back to what the store holds). A node that stops leading calls it
// before its log is appended to or truncated as a follower's.
func (r *Raft) stopParallelAppend() {
	a := r.parallelAppend.Load()
	if a == nil {
		return
	}
	a.close()
	r.parallelAppend.CompareAndSwap(a, nil)
	if a.failed.Load() {
		r.resetLastLog()
	}
}

// storedAsLeader clears leaderStoreFailed after a leader's successful
// store.
func (r *Raft) storedAsLeader() {
	if r.leaderStoreFailed.Load() {
		r.leaderStoreFailed.Store(false)
	}
}

// getLog reads the entry at index: one a leader dispatched and has not
// stored yet, or one of the log store.
func (r *Raft) getLog(index uint64, out *Log) error {
	if a := r.parallelAppend.Load(); a != nil && a.get(index, out) {
		return nil
	}
	return r.logs.GetLog(index, out)
}

// resetLastLog sets the last log to what the log store holds, after a
// leader's background store failed with entries dispatched but not stored.
func (r *Raft) resetLastLog() {
	idx, err := r.logs.LastIndex()
	if err != nil {
		r.logger.Error("failed to get last log index", "error", err)
		return
	}
	var term uint64
	if idx > 0 {
		var l Log
		if err := r.logs.GetLog(idx, &l); err != nil {
			r.logger.Error("failed to get last log", "index", idx, "error", err)
			return
		}
		term = l.Term
	}
	if snapIdx, snapTerm := r.getLastSnapshot(); idx < snapIdx {
		idx, term = snapIdx, snapTerm
	}
	r.setLastLog(idx, term)
}
