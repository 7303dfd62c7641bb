package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
)

// ErrLostIdentity is returned by Start for a node that starts on a new
// data directory under a node id its site counts as a voter (docs/adr/027).
var ErrLostIdentity = errors.New("server: refusing to start under a node id that lost its data")

// ErrPeerAddressInUse is returned by Start for a node on a new data
// directory whose advertised peer address is the one another node, alive
// in gossip, serves at: the site would take the new node for that node's
// replacement (docs/adr/027) and drop the live node from its groups.
var ErrPeerAddressInUse = errors.New("server: refusing to start at another node's peer address")

// identityWait bounds how long a node on a new data directory looks for a
// member of its site that answers before it starts without the check, and
// identityAskTimeout how long it waits for one answer.
const (
	identityWait       = 20 * time.Second
	identityAskTimeout = 2 * time.Second
	identityRetry      = 500 * time.Millisecond
)

// checkFreshIdentity is run by a node whose data directory is new (no
// raft.db) and that joins a site, before it opens any raft group: it joins
// gossip, asks the live members of its site for their placement maps and
// the voters of the site catalog, and refuses (ErrLostIdentity) if any of
// them counts this node's id as a voter of the catalog or of a shard. Such
// a node lost its votes and logs (a wiped disk, a container started
// without its volume); under its old id it would rejoin those groups as a
// voter that remembers nothing, and a group could then elect a leader
// without entries it committed. A new node is a voter of nothing until it
// caught up, so it always passes. A node that reaches no member through
// --join within joinWait fails to start and creates nothing. If the
// members it reached do not answer within identityWait the node starts
// all the same, with a warning: the check must not keep a site that
// restarts from being started.
func (s *Server) checkFreshIdentity() error {
	// The node must reach its site through --join within joinWait in any
	// case (joinSite): failing here, before raft.db is created, leaves the
	// directory new, so that the next start checks again. Failing after
	// it left a directory the next start took for the node's own data,
	// and started on it unchecked under an id the site may count as a
	// voter.
	jctx, jcancel := context.WithTimeout(context.Background(), joinWait)
	_, err := s.members.Join(jctx, s.cfg.Join)
	jcancel()
	if err != nil {
		return fmt.Errorf("join %v: %w: no node of the site answered within %v; this node's data directory is new and was left as it was: "+
			"check that --join names the gossip address (--gossip-addr) of a running node of site %s and that it is reachable, then start the node again",
			s.cfg.Join, err, joinWait, s.cfg.Site)
	}
	if !s.knowsOtherMembers() {
		// The join reached this node alone: --join names its own gossip
		// address (the first node of a site given the --join of the
		// others). Started so, it would wait for a site that is not
		// there, and never be ready.
		return fmt.Errorf("join %v: no node but this one answered: --join names this node's own gossip address (--gossip-addr %s); "+
			"the first node of a new site starts without --join, a later node names the gossip address of a running node of site %s: "+
			"this node's data directory is new and was left as it was",
			s.cfg.Join, s.members.Local().GossipAddr, s.cfg.Site)
	}
	ctx, cancel := context.WithTimeout(context.Background(), identityWait)
	defer cancel()
	if err := s.checkPeerAddress(ctx); err != nil {
		return err
	}
	for {
		answered, err := s.askSite(ctx)
		if err != nil {
			return err
		}
		if answered != "" {
			s.log.Info("new data directory: the site counts this node id as a voter of nothing", "asked", answered)
			return nil
		}
		t := time.NewTimer(identityRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			s.log.Warn("new data directory: no member of the site answered; starting without checking that the site does not know this node id",
				"join", s.cfg.Join, "waited", identityWait)
			return nil
		case <-t.C:
		}
	}
}

// knowsOtherMembers reports whether gossip knows a member besides this
// node, in any state.
func (s *Server) knowsOtherMembers() bool {
	self := s.members.Local().Name()
	for _, m := range s.members.Members() {
		if m.Name() != self {
			return true
		}
	}
	return false
}

// checkPeerAddress refuses (ErrPeerAddressInUse) a node on a new data
// directory that advertises the peer address of another node gossip
// reports alive, when a node answers at that address: this node's peer
// port does not serve yet, so the answer is the other node's. A node
// started on a dead node's host and ports under a new id (the way back
// for a node that lost its data, docs/adr/027) finds no one else there,
// even while gossip still reports the dead node alive, and starts; a
// node whose --peer-advertise-addr names a live node's address (a copy
// of another node's flags) would be taken for that node's replacement,
// and the site would drop the live node from the site catalog, from every
// shard and from the cluster configuration.
func (s *Server) checkPeerAddress(ctx context.Context) error {
	if guards.Off(guards.PeerAddressInUse) {
		return nil
	}
	own := s.members.Local().PeerAddr
	for _, m := range s.members.Members() {
		if m.State != membership.StateAlive || m.PeerAddr != own || (m.Site == s.cfg.Site && m.NodeID == s.cfg.NodeID) {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, identityAskTimeout)
		_, _, err := s.placementAt(actx, own)
		cancel()
		if !answered(err) {
			s.log.Info("new data directory: gossip reports a node alive at this node's peer address, and no node answers there: taking its place",
				"member", m.NodeID, "member_site", m.Site, "peer_addr", own, "err", err)
			continue
		}
		flag := "--peer-addr"
		if s.cfg.PeerAdvertise != "" {
			flag = "--peer-advertise-addr"
		}
		return fmt.Errorf("%w: node %s of site %s would advertise peer address %s (%s), but node %s of site %s is alive and serves there; "+
			"started so, the site would take this node for %s's replacement and drop %s from the site catalog, from its shards and from the cluster configuration: "+
			"give this node a peer address of its own (this node's data directory is new and was left as it was)",
			ErrPeerAddressInUse, s.cfg.NodeID, s.cfg.Site, own, flag, m.NodeID, m.Site, m.NodeID, m.NodeID)
	}
	return nil
}

// answered reports whether a call that returned err reached a node that
// served it: no error, or an error of the node's own, not of a connection
// that never carried the call.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.OK:
		return err == nil
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// askSite asks every live member of the node's site at once for its
// placement. It fails with catalog.ErrNodeRemoved if an answer lists this
// node's id as removed from the site (docs/adr/030), with ErrLostIdentity
// if one counts it as a voter, else returns the answering members' ids
// (empty if none answered).
func (s *Server) askSite(ctx context.Context) (answered string, err error) {
	type answer struct {
		node    string
		catalog bool
		shards  int
		epoch   uint64
		removed bool
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	for _, m := range s.members.Members() {
		if m.Site != s.cfg.Site || m.NodeID == s.cfg.NodeID || m.State != membership.StateAlive || m.PeerAddr == "" {
			continue
		}
		wg.Add(1)
		go func(m membership.Member) {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, identityAskTimeout)
			defer cancel()
			resp, pm, err := s.placementAt(actx, m.PeerAddr)
			if err != nil {
				s.log.Debug("new data directory: asking a member for its placement", "member", m.NodeID, "err", err)
				return
			}
			catalog, shards := knownTo(pm, resp.CatalogVoters, s.cfg.NodeID)
			removed := slices.Contains(resp.RemovedNodes, s.cfg.NodeID)
			mu.Lock()
			answers = append(answers, answer{node: m.NodeID, catalog: catalog, shards: shards, epoch: pm.Epoch, removed: removed})
			mu.Unlock()
		}(m)
	}
	wg.Wait()
	// The newest map that knows the node names it.
	sort.Slice(answers, func(i, j int) bool {
		if answers[i].epoch != answers[j].epoch {
			return answers[i].epoch > answers[j].epoch
		}
		return answers[i].node < answers[j].node
	})
	var ids []string
	for _, a := range answers {
		ids = append(ids, a.node)
	}
	for _, a := range answers {
		if a.removed {
			return "", fmt.Errorf("%w: node %s of site %s was removed from its site for good (kvctl node remove; asked %s), and the site does not take a removed node id back: "+
				"start this node with a new --node-id (its data directory is still empty); see \"Removing a dead node for good\" in docs/operations.md",
				catalog.ErrNodeRemoved, s.cfg.NodeID, s.cfg.Site, a.node)
		}
	}
	for _, a := range answers {
		if !a.catalog && a.shards == 0 {
			continue
		}
		var roles []string
		if a.catalog {
			roles = append(roles, "the site catalog")
		}
		switch {
		case a.shards == 1:
			roles = append(roles, "1 shard")
		case a.shards > 1:
			roles = append(roles, fmt.Sprintf("%d shards", a.shards))
		}
		return "", fmt.Errorf("%[1]w: this node's data directory is new, but its site already knows its node id: node %[2]s of site %[3]s is a voter of %[4]s (asked %[5]s). "+
			"It lost its raft votes and logs, and a group that counts it as a voter could elect a leader without entries it committed: "+
			"start this node with a new --node-id (its data directory is still empty; the same host and ports will do: when the new id takes the address of %[2]s, "+
			"the site drops %[2]s from the site catalog's group, from every shard and from the cluster configuration at once, and the new id gets replicas as a new node; "+
			"%[2]s stays in the site's list of nodes (kvctl cluster members shows it unknown, with 0 replicas) until you run kvctl node remove %[2]s); see \"A damaged data directory\" in docs/operations.md",
			ErrLostIdentity, s.cfg.NodeID, s.cfg.Site, strings.Join(roles, " and of "), a.node)
	}
	return strings.Join(ids, ","), nil
}

// knownTo reports whether node id is a voter of the site catalog (voters)
// and of how many shards of m.
func knownTo(m placement.Map, voters []string, id string) (catalog bool, shards int) {
	for _, reps := range m.Shards {
		for _, r := range reps {
			if string(r.Node) == id && r.Voter {
				shards++
			}
		}
	}
	return slices.Contains(voters, id), shards
}

// placementAt asks the node at peer address addr for its placement map, the
// voters of its site catalog and the node ids its site removed
// (peer.Service.Placement).
func (s *Server) placementAt(ctx context.Context, addr string) (*peerv1.PlacementResponse, placement.Map, error) {
	c, err := s.pool.Node(addr)
	if err != nil {
		return nil, placement.Map{}, err
	}
	resp, err := c.Placement(ctx, &peerv1.PlacementRequest{})
	if err != nil {
		return nil, placement.Map{}, err
	}
	m, err := placement.UnmarshalMap(resp.Map)
	if err != nil {
		return nil, placement.Map{}, err
	}
	return resp, m, nil
}

// leaderMap returns the site catalog leader's placement map, this node's
// own when it leads the catalog: the host deletes a replica its own map no
// longer assigns only if this map does not assign it either (docs/adr/028).
func (s *Server) leaderMap(ctx context.Context) (placement.Map, error) {
	if s.catalog.IsLeader() {
		// Its map once it applied what was committed: a node elected
		// while it replays its log after a restart holds an old map.
		return s.catalog.LeaderMap(ctx)
	}
	id, addr := s.catalog.Leader()
	if addr == "" {
		return placement.Map{}, errors.New("the site catalog has no known leader")
	}
	_, m, err := s.placementAt(ctx, addr)
	if err != nil {
		return placement.Map{}, fmt.Errorf("asking catalog leader %s: %w", id, err)
	}
	return m, nil
}

// removed stops the node when the catalog leader tells it that its site
// removed its node id for good (kvctl node remove, docs/adr/030): it came
// back on a data directory the site gave up, after a restart or a healed
// partition, and must not serve that data or take part in the site under
// that id. The notice must name this node and site.
func (s *Server) removed(req *peerv1.NodeRemovedRequest) error {
	if req.NodeId != s.cfg.NodeID || req.Site != s.cfg.Site {
		return fmt.Errorf("%w: it names node %s of site %s, this is node %s of site %s", peer.ErrOtherNode, req.NodeId, req.Site, s.cfg.NodeID, s.cfg.Site)
	}
	by := req.RemovedBy
	if by == "" {
		by = "unknown"
	}
	s.fail(fmt.Errorf("%w: node %s of site %s was removed from its site for good (placement epoch %d, asked by %s; told by catalog leader %s), and the site no longer counts on this data directory: "+
		"stop this kvd and wipe its data directory (%s); to use the machine again, start kvd on the empty directory with a new --node-id; see \"Removing a dead node for good\" in docs/operations.md",
		catalog.ErrNodeRemoved, s.cfg.NodeID, s.cfg.Site, req.Epoch, by, req.LeaderId, s.cfg.DataDir))
	return nil
}
