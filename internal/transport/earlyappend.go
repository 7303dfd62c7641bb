package transport

import (
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
)

// Early append: hashicorp/raft's leader stores new entries in its own log
// (an fsync) before it wakes its replicators, so a write waits for two
// fsyncs one after the other: the leader's, then a follower's. The
// leader's group transport therefore sends the entries to each follower
// as the leader starts storing them (EntriesStoring, called by the log
// store the leader's raft writes through), on the same pipeline stream
// as raft's own messages and ahead of them: the follower stores them
// while the leader does. raft's own AppendEntries for entries that all
// went ahead on the stream is then not sent: it is answered with the
// follower's answer to the early request that carried the last of them
// (coveredBy, receiveCovered). etcd's leader likewise sends before its
// own WAL write completes. On unless Config.EarlyAppend is false.
//
// The message is an ordinary AppendEntries of the leader's current term
// carrying entries of that term, right after the last entry sent on the
// stream, with the index the leader applied as its commit index: a valid
// raft message whatever happens next. The leader counts itself towards a
// commit only once its own StoreLogs returned, and a follower only
// through an answer that shows it stored the entries. So an entry is
// still acknowledged only when a majority holds it durably. If the
// leader fails before its fsync, followers may hold entries the leader
// lost; they were never acknowledged, and raft settles them like any
// uncommitted entries (a later leader commits or overwrites them).
//
// EarlyAppender is implemented by every group transport this package
// opens.
type EarlyAppender interface {
	// EntriesStoring tells the transport that the local raft is about to
	// store entries in its log. It does not block on the network.
	EntriesStoring(entries []*raft.Log)
}

var _ EarlyAppender = (*groupTransport)(nil)

// EntriesStoring implements EarlyAppender. It sends entries on each
// pipeline whose stream they follow, when this replica leads their term.
func (g *groupTransport) EntriesStoring(entries []*raft.Log) {
	if len(entries) == 0 || !g.net.cfg.EarlyAppend {
		return
	}
	term := entries[0].Term
	for k, e := range entries {
		if e.Term != term || (k > 0 && e.Index != entries[k-1].Index+1) {
			return
		}
	}
	g.mu.Lock()
	pipes := make([]*pipeline, 0, len(g.mu.pipelines))
	for p := range g.mu.pipelines {
		pipes = append(pipes, p)
	}
	g.mu.Unlock()
	for _, p := range pipes {
		p.sendEarly(entries)
	}
}

// sendEarly sends entries ahead of raft on p if they follow the last entry
// sent on it in raft's term of p, which must be theirs, and it can do so
// without waiting: for a slot, or for raft's replication goroutine, which
// may be blocked sending.
func (p *pipeline) sendEarly(entries []*raft.Log) {
	if !p.sendMu.TryLock() {
		return
	}
	defer p.sendMu.Unlock()
	first, last := entries[0], entries[len(entries)-1]
	if p.term == 0 || first.Term != p.term || first.Index != p.shipIdx+1 {
		return
	}
	select {
	case p.slots <- struct{}{}:
	default:
		return
	}
	if p.batched.Load() > 0 {
		// Do not leave an idle group's message waiting behind entries.
		p.g.net.batch.flush(p.target)
	}
	args := &raft.AppendEntriesRequest{
		RPCHeader:         p.header,
		Term:              p.term,
		PrevLogEntry:      p.shipIdx,
		PrevLogTerm:       p.shipTerm,
		Entries:           entries,
		LeaderCommitIndex: p.g.appliedIndex(),
	}
	msg := appendEntriesToProto(p.g.name, args)
	msg.Header = p.g.stamp(msg.Header)
	f := &appendFuture{start: time.Now(), args: args, resp: &raft.AppendEntriesResponse{}, reqBytes: proto.Size(msg), early: true, done: make(chan struct{})}
	if err := p.stream.Send(msg); err != nil {
		<-p.slots
		p.g.net.metrics.observeSent(typeEarlyAppend, f.start, f.reqBytes, 0, err)
		return
	}
	p.shipIdx, p.shipTerm = last.Index, last.Term
	if n := len(p.earlies); n > 0 && p.earlies[n-1].to+1 != first.Index {
		p.earlies = p.earlies[:0]
	}
	if len(p.earlies) == maxEarlies {
		p.earlies = append(p.earlies[:0], p.earlies[1:]...)
	}
	p.earlies = append(p.earlies, earlyRange{from: first.Index, to: last.Index, f: f})
	p.g.noteSent(p.target, args)
	p.inflight <- f // never blocks: len(inflight) <= len(slots)
}

// maxEarlies bounds the early requests a pipeline remembers.
const maxEarlies = 16

// earlyRange is an early request and the entries it carried.
type earlyRange struct {
	from, to uint64
	f        *appendFuture
}

// coveredBy returns the early request whose answer answers args, raft's
// request about to be sent on p, or nil if args must be sent: args
// carries entries of p's term, all of which went ahead on p in early
// requests (contiguous, so the success of the one that carried the last
// of them means the follower's log matches the leader's up to it).
// REQUIRES: p.sendMu.
func (p *pipeline) coveredBy(args *raft.AppendEntriesRequest) *appendFuture {
	n := len(args.Entries)
	if n == 0 || args.Term != p.term || len(p.earlies) == 0 {
		return nil
	}
	first, last := args.Entries[0].Index, args.Entries[n-1].Index
	drop := 0
	for drop < len(p.earlies) && p.earlies[drop].to < first {
		drop++
	}
	p.earlies = append(p.earlies[:0], p.earlies[drop:]...)
	if len(p.earlies) == 0 || p.earlies[0].from > first || args.PrevLogEntry+1 != first {
		return nil
	}
	for _, r := range p.earlies {
		if r.from <= last && last <= r.to {
			return r.f
		}
	}
	return nil
}

// appliedIndex is the highest index the leader's state machine applied
// (CommitApplied): a commit index any follower whose log matches the
// leader's may be told.
func (g *groupTransport) appliedIndex() uint64 {
	g.push.mu.Lock()
	defer g.push.mu.Unlock()
	return g.push.applied
}

// receiveCovered answers f, a request of raft's that was not sent because
// early requests carried its entries, with the answer to the one that
// carried the last of them; false if the pipeline closed meanwhile. That
// one is earlier on the stream, so it was answered already.
func (p *pipeline) receiveCovered(f *appendFuture) bool {
	var err error
	select {
	case <-f.cover.done:
		err = f.cover.err
	case <-p.closed:
		f.respond(raft.ErrPipelineShutdown)
		return false
	}
	if err == nil {
		*f.resp = *f.cover.resp
		p.g.noteAnswer(p.target, f.args, f.resp)
	}
	return p.finish(f, typeEarlyCovered, 0, err)
}

// noteShipped records, under p.sendMu, what raft's own request args sent
// on p: its term and leader, and the last entry it leaves the follower's
// log at.
func (p *pipeline) noteShipped(args *raft.AppendEntriesRequest) {
	if args.Term != p.term {
		p.term, p.shipIdx, p.shipTerm = args.Term, 0, 0
		p.earlies = p.earlies[:0]
	}
	p.header = args.RPCHeader
	idx, term := args.PrevLogEntry, args.PrevLogTerm
	if n := len(args.Entries); n > 0 {
		idx, term = args.Entries[n-1].Index, args.Entries[n-1].Term
	}
	if idx > p.shipIdx {
		p.shipIdx, p.shipTerm = idx, term
	}
}

// earlyLogStore is the log store a leader's raft writes through: it tells
// the transport of entries before storing them.
type earlyLogStore struct {
	raft.LogStore
	t EarlyAppender
}

// WithEarlyAppend returns logs wrapped so that t sends the entries the
// leader stores to its followers while it stores them. It returns logs
// itself if t is not an EarlyAppender.
func WithEarlyAppend(logs raft.LogStore, t raft.Transport) raft.LogStore {
	ea, ok := t.(EarlyAppender)
	if !ok {
		return logs
	}
	return &earlyLogStore{LogStore: logs, t: ea}
}

// StoreLog implements raft.LogStore.
func (s *earlyLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (s *earlyLogStore) StoreLogs(logs []*raft.Log) error {
	s.t.EntriesStoring(logs)
	return s.LogStore.StoreLogs(logs)
}
