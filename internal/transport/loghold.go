package transport

import (
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// A replica whose log lost entries it had stored (the tail of its
// write-ahead log zeroed or cut on a disk that lied about a sync), while
// its state database shows it applied them, must not help elect a leader
// until it holds them again: those entries may have been committed by it
// and a leader that is gone, and a candidate that lacks them (a replica
// that lagged) would be elected with its vote, or would elect it, and the
// committed entries would be lost. Until its log reaches the index its
// state applied, the replica grants no vote (but a leadership transfer's:
// the leader that hands off caught the target up first) and asks for none.

// LogHolds is implemented by a group transport that can hold a replica's
// votes while its log lacks entries it had (every transport this package
// opens).
type LogHolds interface {
	// HoldForLog holds the replica's votes and its campaigns until last()
	// reaches index.
	HoldForLog(index uint64, last func() uint64)
}

var _ LogHolds = (*groupTransport)(nil)

type logHold struct {
	index uint64
	last  func() uint64
}

// HoldForLog implements LogHolds.
func (g *groupTransport) HoldForLog(index uint64, last func() uint64) {
	if index == 0 || last == nil {
		return
	}
	g.logHold.Store(&logHold{index: index, last: last})
}

// logHeld returns, while the hold lasts, the index the log must reach
// and where it ends.
func (g *groupTransport) logHeld() (index, last uint64, held bool) {
	h := g.logHold.Load()
	if h == nil || guards.Off(guards.LogHold) {
		return 0, 0, false
	}
	if last = h.last(); last >= h.index {
		g.logHold.CompareAndSwap(h, nil)
		return 0, 0, false
	}
	return h.index, last, true
}

// campaignHeld refuses this replica's request for votes (a campaign, or
// its pre-vote) while its log is held, but a transfer's.
func (g *groupTransport) campaignHeld(transfer bool) error {
	if transfer {
		return nil
	}
	if index, last, held := g.logHeld(); held {
		g.net.metrics.leaseRefusals.WithLabelValues("log_held").Inc()
		return refusedf("the replica of %s asks for no vote: its log ends at %d and lost entries up to %d that its state applied; it waits for a leader that holds them", g.name, last, index)
	}
	return nil
}

// heldLogVote returns an error if req is a vote its group's replica may
// not grant: its log lacks entries its state applied.
func (s *service) heldLogVote(req *peerv1.RequestVoteRequest) error {
	if req.GetLeadershipTransfer() {
		return nil
	}
	g, err := s.n.group(req.GetGroup())
	if err != nil {
		return nil // unary answers it
	}
	if index, last, held := g.logHeld(); held {
		s.n.metrics.leaseRefusals.WithLabelValues("log_held").Inc()
		return refusedf("the replica of %s grants no vote: its log ends at %d and lost entries up to %d that its state applied (a candidate may lack them)", req.GetGroup(), last, index)
	}
	return nil
}
