package shard

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/guards"
)

// leaseTransport is what a group transport offers for read leases
// (transport.ReadLeases, docs/adr/024-read-leases.md).
type leaseTransport interface {
	SetLeasePromise(d time.Duration, restarted bool)
	SetTermSource(term func() uint64)
	FollowerLease(target raft.ServerAddress, term uint64) time.Time
	Transferred(term uint64) bool
}

// promise makes this replica's successful answers promise HeartbeatTimeout
// to their leader (hashicorp/raft's follower grants no other candidate a
// vote within it), and, if the replica restarted, refuse votes for as
// long. It returns where Open stores the raft once it runs, which the
// transport reads the current term from (until then it refuses every
// leadership transfer that names a term).
func (g *Group) promise(restarted bool) *atomic.Pointer[raft.Raft] {
	var started atomic.Pointer[raft.Raft]
	lt, ok := g.deps.Transport.(leaseTransport)
	if !ok {
		return &started
	}
	g.leases = lt
	lt.SetLeasePromise(g.cfg.HeartbeatTimeout, restarted)
	if lh, ok := g.deps.Transport.(interface {
		HoldForLog(index uint64, last func() uint64)
	}); ok && g.lostUpTo > 0 {
		// The log lost entries its state applied: they may have been
		// committed with this replica's copy, so it helps elect no
		// leader until it holds them again (transport loghold.go).
		lh.HoldForLog(g.lostUpTo, func() uint64 {
			if r := started.Load(); r != nil {
				return r.LastIndex() // the log's or a snapshot's a leader sent
			}
			last, err := g.logs.LastIndex()
			if err != nil {
				return 0
			}
			return last
		})
	}
	lt.SetTermSource(func() uint64 {
		if r := started.Load(); r != nil {
			return r.CurrentTerm()
		}
		return math.MaxUint64
	})
	return &started
}

// leaseHeld reports whether this replica holds a read lease in term: it
// leads in term, sent no leadership transfer in it, and the voters of its
// latest configuration that promised it their votes within their
// promise (FollowerLease) make a quorum with it. No other replica can then
// be elected: any quorum of votes needs one of them.
func (g *Group) leaseHeld(term uint64) bool {
	lt := g.leases
	if lt == nil || !g.cfg.ReadLeases {
		return false
	}
	r := g.raft
	// Term, then state, then term: the replica led in term at the
	// second read (a replica steps down before it takes a newer term).
	if r.CurrentTerm() != term || r.State() != raft.Leader || r.CurrentTerm() != term || lt.Transferred(term) {
		return false
	}
	self := raft.ServerID(g.deps.NodeID)
	var buf [8]time.Time
	leases := buf[:0]
	voters, isVoter := 0, false
	for _, s := range r.GetConfiguration().Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == self {
			isVoter = true
			continue
		}
		leases = append(leases, lt.FollowerLease(s.Address, term))
	}
	if !isVoter {
		return false
	}
	need := voters / 2 // followers that make a quorum with this replica
	if need == 0 {
		return true // the only voter: no other replica can be elected
	}
	slices.SortFunc(leases, func(a, b time.Time) int { return b.Compare(a) })
	until := leases[need-1]
	if until.IsZero() {
		return false
	}
	if guards.Off(guards.LeaseExpiry) {
		return true // test-only: a promise of the term holds forever
	}
	return time.Now().Before(until)
}

// transferSlack is how many of its leader's entries a replica may lack and
// still take the leadership: about what a busy shard commits while the
// transfer catches the replica up.
const transferSlack = 64

// ackTransport is a raft transport that tracks, on the leader, the last
// entry each follower acknowledged (transport.Acknowledged).
type ackTransport interface {
	Acknowledged(target raft.ServerAddress, term uint64) (uint64, bool)
}

// FollowerCaughtUp reports whether this replica leads and the replica at
// addr can take its leadership at once: it answered lately, with a
// promise (FollowerLease) that still runs, and acknowledged every entry
// of the leader's log but the last transferSlack. hashicorp/raft
// refuses every write of the shard while a transfer waits for its
// target to catch up, and its replication to a follower that failed for
// a while waits up to ten seconds between attempts, also once the
// follower answers again. Without a transport that tells, it reports
// whether this replica leads.
func (g *Group) FollowerCaughtUp(addr raft.ServerAddress) bool {
	r := g.raft
	term := r.CurrentTerm()
	if r.State() != raft.Leader {
		return false
	}
	if lt := g.leases; lt != nil && !time.Now().Before(lt.FollowerLease(addr, term)) {
		return false
	}
	at, ok := g.deps.Transport.(ackTransport)
	if !ok {
		return true
	}
	idx, ok := at.Acknowledged(addr, term)
	return ok && idx+transferSlack >= r.LastIndex()
}
