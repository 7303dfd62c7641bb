package transport

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/causeway-db/causeway/internal/guards"
)

// ErrIncarnation: the two ends of a request of one of the site's own
// groups belong to different incarnations of the site (docs/adr/029).
// Incoming it is codes.FailedPrecondition.
var ErrIncarnation = errors.New("transport: nodes of different incarnations of the site")

// errIncarnationUnrecorded: a node could not record the site incarnation
// it was joining. Incoming it is codes.Unavailable.
var errIncarnationUnrecorded = errors.New("transport: site incarnation not recorded")

// incarnation is the site incarnation of the node: a random number the
// site's first node draws when it bootstraps the site; every node that
// joins it adopts the first one it hears (OnIncarnation). Requests of the
// site's own groups (all but the cross-site ones, TransportAt) carry it
// and are refused between nodes of different incarnations, so that a node
// that lost its data and bootstrapped a new site at an old member's
// address never mixes its raft logs with the old site's.
type incarnation struct {
	v      atomic.Uint64
	logged atomic.Uint64 // the sender incarnation last refused and logged
	mu     sync.Mutex    // serializes adoption
	adopt  func(uint64) error
}

// SetIncarnation sets the site incarnation of this node (0: unknown).
func (n *Network) SetIncarnation(v uint64) { n.inc.v.Store(v) }

// Incarnation returns the site incarnation of this node, 0 if unknown.
func (n *Network) Incarnation() uint64 { return n.inc.v.Load() }

// OnIncarnation sets fn, which a node whose incarnation is unknown calls
// with the first incarnation a request of a site group carries, before it
// serves the request: fn records it durably, and the node then belongs to
// that incarnation. A request whose fn fails is refused as unavailable.
func (n *Network) OnIncarnation(fn func(uint64) error) {
	n.inc.mu.Lock()
	n.inc.adopt = fn
	n.inc.mu.Unlock()
}

// siteIncarnation is the incarnation g's requests carry: 0 for a
// cross-site group.
func (g *groupTransport) siteIncarnation() uint64 {
	if g.crossSite {
		return 0
	}
	return g.net.inc.v.Load()
}

// admitIncarnation decides whether a request of g that carries sender
// incarnation theirs may reach raft (guard site-incarnation).
func (g *groupTransport) admitIncarnation(theirs uint64) error {
	if g.crossSite || theirs == 0 || guards.Off(guards.SiteIncarnation) {
		return nil
	}
	n := g.net
	local := n.inc.v.Load()
	if local == theirs {
		return nil
	}
	if local == 0 {
		n.inc.mu.Lock()
		defer n.inc.mu.Unlock()
		if local = n.inc.v.Load(); local == 0 {
			if n.inc.adopt != nil {
				if err := n.inc.adopt(theirs); err != nil {
					return toStatus(fmt.Errorf("%w: recording the site incarnation %016x: %w", errIncarnationUnrecorded, theirs, err))
				}
			}
			n.inc.v.Store(theirs)
			n.log.Info("joined the site's incarnation", "incarnation", fmt.Sprintf("%016x", theirs), "group", g.name)
			return nil
		}
		if local == theirs {
			return nil
		}
	}
	n.metrics.incarnationRefusals.Inc()
	if n.inc.logged.Swap(theirs) != theirs {
		n.log.Error("refusing raft traffic from a node of another incarnation of the site: one of the two lost its data and bootstrapped a new site at an address the other site knows",
			"group", g.name, "incarnation", fmt.Sprintf("%016x", local), "sender_incarnation", fmt.Sprintf("%016x", theirs))
	}
	return toStatus(fmt.Errorf("%w: this node of %s is of site incarnation %016x, the sender of %016x (a node that lost its data and bootstrapped a new site? see \"A damaged data directory\" in docs/operations.md)",
		ErrIncarnation, g.name, local, theirs))
}

// CountIncarnationRefusal counts a request of another incarnation of the
// site that the node refused outside the raft transport (a forwarded
// request, a peer RPC) in causeway_transport_incarnation_refusals_total.
func (n *Network) CountIncarnationRefusal() { n.metrics.incarnationRefusals.Inc() }
