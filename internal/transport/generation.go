package transport

import (
	"errors"

	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// ErrGeneration: the two ends of a request hold replicas of different
// generations of the group; raft traffic between them is refused
// (docs/adr/014). Incoming it is codes.FailedPrecondition.
var ErrGeneration = errors.New("transport: replicas of different generations of the group")

// SetGeneration sets the generation of the group's local replica: every
// request it sends carries it, and requests of another generation are
// refused (see OnNewerGeneration). A group's generation starts at 0.
func (g *groupTransport) SetGeneration(gen uint64) { g.gen.Store(gen) }

// Generation returns the generation of the group's local replica.
func (g *groupTransport) Generation() uint64 { return g.gen.Load() }

// OnNewerGeneration sets fn, called when a peer shows that a replica of a
// newer generation of the group exists than the local one: a request from
// such a replica, or a refusal by one. When fn returns true the local
// replica takes that generation (one with no state may) and the request is
// served; otherwise it is refused. fn runs on the request's goroutine, or
// raft's: it must not block. Without fn the local replica never changes
// generation.
func (g *groupTransport) OnNewerGeneration(fn func(newer uint64) bool) {
	g.mu.Lock()
	g.mu.newer = fn
	g.mu.Unlock()
}

// admit decides whether a request with header h may reach raft: of the
// same site incarnation (incarnation.go) and generation as the local
// replica.
func (g *groupTransport) admit(h *peerv1.RaftHeader) error {
	if err := g.admitIncarnation(h.GetIncarnation()); err != nil {
		return err
	}
	gen := h.GetGeneration()
	local := g.gen.Load()
	if gen == local {
		return nil
	}
	if gen > local && g.newerGeneration(gen) {
		return nil
	}
	if g.loggedRefusal.Swap(gen+1) != gen+1 { // once per sender generation in a row
		g.net.log.Warn("refusing raft traffic of another generation of the group", "group", g.name,
			"generation", local, "sender_generation", gen)
	}
	return generationRefusal(g.name, local, gen)
}

// newerGeneration reports a newer generation to the owner, and takes it if
// the owner agrees.
func (g *groupTransport) newerGeneration(gen uint64) bool {
	g.mu.Lock()
	fn := g.mu.newer
	g.mu.Unlock()
	if fn == nil || !fn(gen) {
		return false
	}
	for {
		cur := g.gen.Load()
		if cur >= gen || g.gen.CompareAndSwap(cur, gen) {
			return true
		}
	}
}

// refused handles the error of an outgoing request: a refusal by a replica
// of a newer generation is reported to the owner.
func (g *groupTransport) refused(err error) {
	if !errors.Is(err, ErrGeneration) {
		return
	}
	if theirs, ok := refusingGeneration(err); ok && theirs > g.gen.Load() {
		g.newerGeneration(theirs)
	}
}

// stamp sets the local replica's generation on an outgoing header.
func (g *groupTransport) stamp(h *peerv1.RaftHeader) *peerv1.RaftHeader {
	if h == nil {
		h = &peerv1.RaftHeader{}
	}
	h.Generation = g.gen.Load()
	h.Incarnation = g.siteIncarnation()
	return h
}

// refusingGeneration returns the generation of the replica that refused a
// request, from the status in err.
func refusingGeneration(err error) (uint64, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if r, isRefusal := d.(*peerv1.GenerationRefusal); isRefusal {
			return r.GetGeneration(), true
		}
	}
	return 0, false
}
