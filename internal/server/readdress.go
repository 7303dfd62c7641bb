package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// readdressEvery is how often the shard leaders of this node compare
// their groups' raft configurations with the peer addresses the site
// catalog registers (besides every change of the catalog's state).
const readdressEvery = 2 * time.Second

// A node that restarts on its data with another --peer-addr registers its
// new address with the site catalog (AddNode), but the raft configuration
// of every shard it holds a replica of still names its old address: its
// leaders sent to nothing, its replicas stayed candidates for good (the
// node never ready), and every leadership transfer to it failed, holding
// the shard's writes while it ran. Each shard leader therefore moves such
// a replica to the registered address: raft's AddVoter and AddNonvoter of
// a member it holds change its address and keep its suffrage.
func (s *Server) watchReplicaAddresses() {
	if s.catalog == nil || s.host == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(readdressEvery)
		defer t.Stop()
		for {
			_, changed := s.catalog.State()
			select {
			case <-t.C:
			case <-changed:
			case <-s.stopping:
				return
			}
			s.readdressReplicas()
		}
	}()
}

// readdressReplicas updates, in every shard group this node leads, the
// address of each member whose node the site catalog registers at another
// peer address.
func (s *Server) readdressReplicas() {
	st, _ := s.catalog.State()
	for _, g := range s.host.Groups() {
		if !g.IsLeader() {
			continue
		}
		r := g.Raft()
		cf := r.GetConfiguration()
		if cf.Error() != nil {
			continue
		}
		for _, srv := range cf.Configuration().Servers {
			n, ok := st.Nodes[string(srv.ID)]
			if !ok || n.PeerAddr == "" || raft.ServerAddress(n.PeerAddr) == srv.Address || string(srv.ID) == s.cfg.NodeID {
				continue
			}
			var f raft.IndexFuture
			if srv.Suffrage == raft.Voter {
				f = r.AddVoter(srv.ID, raft.ServerAddress(n.PeerAddr), 0, 10*time.Second)
			} else {
				f = r.AddNonvoter(srv.ID, raft.ServerAddress(n.PeerAddr), 0, 10*time.Second)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := g.Wait(ctx, f)
			cancel()
			if err != nil {
				s.log.Warn("could not move a replica to its node's new peer address", "shard", g.ID().String(), "node", srv.ID, "old", srv.Address, "new", n.PeerAddr, "err", err)
				continue
			}
			s.log.Info("moved a replica to its node's new peer address", "shard", g.ID().String(), "node", srv.ID, "old", srv.Address, "new", n.PeerAddr)
		}
	}
}
