package transport

import (
	"fmt"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// A node that stops cleanly hands the leadership of its groups to other
// nodes, then finishes the requests in flight (up to its shutdown grace)
// before it closes them. Meanwhile its raft groups are open and gossip
// still reports it alive, so the site catalog's leader balancing, which
// moves each shard's leadership to its preferred node, would hand some
// of them back (a catalog leader elected by the hand-off does it in its
// first round): those shards then have no leader from the node's exit
// until an election timeout later. From RefuseLeadership on, the node
// takes no leadership: a transfer to it is refused and its replicas ask
// for no vote but a transfer's (one it accepted before).

// RefuseLeadership makes every group of this node refuse leadership from
// now on: an incoming TimeoutNow fails with ErrStopping (the transfer's
// leader goes on leading), and its replicas start no election of their
// own. A node calls it as it begins to stop, before it hands its
// leaderships off. It cannot be undone.
func (n *Network) RefuseLeadership() {
	if guards.Off(guards.StopRefusesLeader) {
		return
	}
	n.stopping.Store(true)
}

// stoppingTransfer returns ErrStopping for a leadership transfer to a
// node that is stopping.
func (s *service) stoppingTransfer(req *peerv1.TimeoutNowRequest) error {
	if !s.n.stopping.Load() {
		return nil
	}
	return fmt.Errorf("%w: a leadership transfer of %s to it", ErrStopping, req.GetGroup())
}

// campaignStopping refuses this replica's request for votes (a campaign,
// or its pre-vote) while its node stops, but a transfer's: the replica
// accepted that transfer before, and its leader holds the group's writes
// until the campaign ends.
func (g *groupTransport) campaignStopping(transfer bool) error {
	if transfer || !g.net.stopping.Load() {
		return nil
	}
	return fmt.Errorf("%w: the replica of %s asks for no vote", ErrStopping, g.name)
}
