package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/transport"
)

// Local gives the service this node's replicas.
type Local interface {
	Group(s placement.Shard) *shard.Group
	// RecoverAlone reopens the replica of s as its group's only voter, in
	// generation gen of the shard.
	RecoverAlone(s placement.Shard, opts recovery.Options, gen uint64) error
}

// Service implements peerv1.NodeServer.
type Service struct {
	peerv1.UnimplementedNodeServer
	local   Local
	catalog *catalog.Catalog
	pool    *Pool
	// onRemoved handles NodeRemoved (nil: refused).
	onRemoved func(*peerv1.NodeRemovedRequest) error
}

// NewService returns the Node service of this node.
func NewService(local Local, cat *catalog.Catalog, pool *Pool) *Service {
	return &Service{local: local, catalog: cat, pool: pool}
}

// OnRemoved sets what the service does when the catalog leader tells this
// node that its site removed it (NodeRemoved, docs/adr/030): fn checks
// that the request names this node and stops it; its error is the call's.
func (s *Service) OnRemoved(fn func(*peerv1.NodeRemovedRequest) error) *Service {
	s.onRemoved = fn
	return s
}

func shardOf(r *peerv1.ShardRef) (placement.Shard, error) {
	if r == nil || r.Keyspace == "" {
		return placement.Shard{}, toStatus(ErrShardRequired)
	}
	return placement.Shard{Keyspace: r.Keyspace, ID: r.Shard}, nil
}

func (s *Service) group(r *peerv1.ShardRef) (*shard.Group, error) {
	sh, err := shardOf(r)
	if err != nil {
		return nil, err
	}
	g := s.local.Group(sh)
	if g == nil {
		return nil, toStatus(fmt.Errorf("%w: %s", ErrNotHosted, sh))
	}
	return g, nil
}

// ScanShard implements peerv1.NodeServer.
func (s *Service) ScanShard(ctx context.Context, req *peerv1.ScanShardRequest) (*peerv1.ScanShardResponse, error) {
	g, err := s.group(req.Shard)
	if err != nil {
		return nil, err
	}
	if req.Limit == 0 || req.Limit > maxScanLimit {
		return nil, toStatus(ErrScanLimit)
	}
	if req.Strong {
		if err := g.ReadBarrier(ctx); err != nil {
			return nil, toStatus(unavailable(err))
		}
	}
	resp := &peerv1.ScanShardResponse{}
	err = g.Read(func(st *storage.ShardTx) error {
		recs, more, err := st.ScanBytes(req.Start, req.End, int(req.Limit), storage.MaxScanPageBytes, req.KeysOnly)
		for _, r := range recs {
			resp.Items = append(resp.Items, &peerv1.ScanItem{Key: r.Key, Value: r.Value, Hlc: r.Version.HLC, Site: r.Version.Site, Stamp: r.Stamp})
		}
		resp.More = more
		return err
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// ReplicaStatus implements peerv1.NodeServer.
func (s *Service) ReplicaStatus(ctx context.Context, req *peerv1.ReplicaStatusRequest) (*peerv1.ReplicaStatusResponse, error) {
	sh, err := shardOf(req.Shard)
	if err != nil {
		return nil, err
	}
	g := s.local.Group(sh)
	if g == nil {
		return &peerv1.ReplicaStatusResponse{}, nil
	}
	st := g.Status()
	resp := &peerv1.ReplicaStatusResponse{
		Hosted: true, State: st.State, LeaderId: st.Leader, LeaderAddr: g.LeaderAddr(),
		Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: max(g.Raft().AppliedIndex(), st.AppliedIndex), LastIndex: g.Raft().LastIndex(),
		Generation: g.Generation(), FailedCheck: g.Corrupt(),
	}
	_, resp.LastLogTerm = g.Raft().LastLog()
	if cf := g.Raft().GetConfiguration(); cf.Error() == nil {
		for _, srv := range cf.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				resp.Voters = append(resp.Voters, string(srv.ID))
			} else {
				resp.Learners = append(resp.Learners, string(srv.ID))
			}
		}
	}
	return resp, nil
}

// ChangeReplicas implements peerv1.NodeServer: the receiving node must lead
// the shard.
func (s *Service) ChangeReplicas(ctx context.Context, req *peerv1.ChangeReplicasRequest) (*peerv1.ChangeReplicasResponse, error) {
	g, err := s.group(req.Shard)
	if err != nil {
		return nil, err
	}
	if req.Op == peerv1.ChangeReplicasRequest_OP_RECOVER_ALONE {
		return s.recoverAlone(g, req)
	}
	if !g.IsLeader() {
		return nil, toStatus(fmt.Errorf("%w: %s is led by %q", ErrNotLeader, g.ID(), g.Leader()))
	}
	r := g.Raft()
	id, addr := raft.ServerID(req.NodeId), raft.ServerAddress(req.PeerAddr)
	if req.NodeId == "" {
		return nil, toStatus(ErrNodeIDRequired)
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, toStatus(unavailable(err))
	}
	var cur *raft.Server
	for _, srv := range cf.Configuration().Servers {
		if srv.ID == id {
			srv := srv
			cur = &srv
		}
	}
	var f raft.IndexFuture
	switch req.Op {
	case peerv1.ChangeReplicasRequest_OP_ADD_LEARNER:
		if cur != nil {
			return &peerv1.ChangeReplicasResponse{}, nil
		}
		f = r.AddNonvoter(id, addr, 0, 10*time.Second)
	case peerv1.ChangeReplicasRequest_OP_PROMOTE:
		if cur != nil && cur.Suffrage == raft.Voter {
			return &peerv1.ChangeReplicasResponse{}, nil
		}
		f = r.AddVoter(id, addr, 0, 10*time.Second)
	case peerv1.ChangeReplicasRequest_OP_TRANSFER_LEADER:
		if cur == nil || cur.Suffrage != raft.Voter {
			return nil, toStatus(fmt.Errorf("%w: %s of %s", ErrNotVoter, req.NodeId, g.ID()))
		}
		if g.DiffersFromMajority(req.NodeId) {
			// A corrupt replica refuses reads and hands its leadership
			// over at its next check: moving the leadership to it (the
			// catalog's leader balancing) made the shard's STRONG reads
			// and CAS fail until then, again and again.
			return nil, toStatus(fmt.Errorf("%w: transfer leadership of %s to %s: its digest differs from the majority's at the last check; repair it first (kvctl node drain %s --wait, then --undo; see \"Replica consistency checks\" in docs/operations.md)", ErrTargetCorrupt, g.ID(), req.NodeId, req.NodeId))
		}
		if addr != "" && addr != cur.Address {
			// The node restarted on another peer address: a transfer to
			// the old one would hold the shard's writes until it timed
			// out. Move the voter to the address first.
			if err := g.Wait(ctx, r.AddVoter(id, addr, 0, 10*time.Second)); err != nil {
				return nil, toStatus(unavailable(fmt.Errorf("move %s of %s to %s: %w", req.NodeId, g.ID(), addr, err)))
			}
			cur.Address = addr
		}
		if !g.FollowerCaughtUp(cur.Address) {
			// hashicorp/raft refuses every write of the shard while a
			// transfer waits for its target to catch up: gossip reports
			// a node alive again seconds before the leader's replication,
			// backing off after failures, reaches it.
			return nil, toStatus(fmt.Errorf("%w: transfer leadership of %s to %s at %s: the transfer would hold the shard's writes until it caught up; retry once it has (a node cut off, restarting, or whose link just came back)", ErrTargetSilent, g.ID(), req.NodeId, cur.Address))
		}
		if err := g.Wait(ctx, r.LeadershipTransferToServer(cur.ID, cur.Address)); err != nil {
			return nil, toStatus(unavailable(fmt.Errorf("transfer leadership of %s to %s: %w", g.ID(), req.NodeId, err)))
		}
		return &peerv1.ChangeReplicasResponse{}, nil
	case peerv1.ChangeReplicasRequest_OP_REMOVE:
		if cur == nil {
			return &peerv1.ChangeReplicasResponse{}, nil
		}
		if g.Leader() == req.NodeId {
			// Hand leadership over first; the caller retries.
			if err := g.Wait(ctx, r.LeadershipTransfer()); err != nil {
				return nil, toStatus(unavailable(fmt.Errorf("transferring leadership of %s: %w", g.ID(), err)))
			}
			return nil, toStatus(fmt.Errorf("%w: leadership of %s transferred; retry the removal", ErrNotLeader, g.ID()))
		}
		f = r.RemoveServer(id, 0, 10*time.Second)
	default:
		return nil, toStatus(fmt.Errorf("%w: %v", ErrUnknownOp, req.Op))
	}
	if err := g.Wait(ctx, f); err != nil {
		return nil, toStatus(unavailable(fmt.Errorf("%v %s on %s: %w", req.Op, req.NodeId, g.ID(), err)))
	}
	return &peerv1.ChangeReplicasResponse{Index: f.Index()}, nil
}

// Drain implements peerv1.NodeServer; it forwards to the catalog leader.
func (s *Service) Drain(ctx context.Context, req *peerv1.DrainRequest) (*peerv1.DrainResponse, error) {
	if req.NodeId == "" {
		return nil, toStatus(ErrNodeIDRequired)
	}
	st, _ := s.catalog.State()
	if _, ok := st.Nodes[req.NodeId]; !ok {
		return nil, toStatus(fmt.Errorf("%w %q", ErrUnknownNode, req.NodeId))
	}
	if s.catalog.IsLeader() {
		epoch, err := s.catalog.SetDraining(ctx, req.NodeId, req.Draining)
		if err != nil {
			return nil, toStatus(unavailable(err))
		}
		return &peerv1.DrainResponse{Epoch: epoch}, nil
	}
	c, err := s.catalogLeader()
	if err != nil {
		return nil, err
	}
	return c.Drain(ctx, req)
}

// catalogLeader returns a client of the catalog leader's Node service,
// for a call this node forwards, or the status saying why there is none.
func (s *Service) catalogLeader() (peerv1.NodeClient, error) {
	_, addr := s.catalog.Leader()
	if addr == "" {
		return nil, toStatus(ErrNoCatalogLeader)
	}
	c, err := s.pool.Node(addr)
	if err != nil {
		return nil, toStatus(unavailable(err))
	}
	return c, nil
}

// RemoveNode implements peerv1.NodeServer; it forwards to the catalog
// leader, which decides (catalog.RemoveNode).
func (s *Service) RemoveNode(ctx context.Context, req *peerv1.RemoveNodeRequest) (*peerv1.RemoveNodeResponse, error) {
	if req.NodeId == "" {
		return nil, toStatus(ErrNodeIDRequired)
	}
	if s.catalog.IsLeader() {
		rn, err := s.catalog.RemoveNode(ctx, req.NodeId, req.RequestedBy)
		if err != nil {
			if !catalog.RemoveRefused(err) {
				err = unavailable(err)
			}
			return nil, toStatus(err)
		}
		return &peerv1.RemoveNodeResponse{Epoch: rn.Epoch, PeerAddr: rn.PeerAddr, ClientAddr: rn.ClientAddr}, nil
	}
	c, err := s.catalogLeader()
	if err != nil {
		return nil, err
	}
	return c.RemoveNode(ctx, req)
}

// NodeRemoved implements peerv1.NodeServer: the catalog leader tells this
// node that its site removed it.
func (s *Service) NodeRemoved(ctx context.Context, req *peerv1.NodeRemovedRequest) (*peerv1.NodeRemovedResponse, error) {
	if req.NodeId == "" {
		return nil, toStatus(ErrNodeIDRequired)
	}
	if s.onRemoved == nil {
		return nil, toStatus(fmt.Errorf("%w: this node does not take removal notices", ErrOtherNode))
	}
	if err := s.onRemoved(req); err != nil {
		return nil, toStatus(err)
	}
	return &peerv1.NodeRemovedResponse{}, nil
}

// Placement implements peerv1.NodeServer.
func (s *Service) Placement(ctx context.Context, _ *peerv1.PlacementRequest) (*peerv1.PlacementResponse, error) {
	st, _ := s.catalog.State()
	m := st.Map
	b, err := m.Marshal()
	if err != nil {
		return nil, toStatus(err)
	}
	// The catalog's voters go with the map: a node that starts on a new
	// data directory checks that its site does not count it as one
	// (docs/adr/027). A node without a configuration names none.
	// So do the ids the site removed for good (docs/adr/030).
	voters, _ := s.catalog.Voters()
	return &peerv1.PlacementResponse{Map: b, Epoch: m.Epoch, CatalogVoters: voters, RemovedNodes: st.RemovedIDs()}, nil
}

// recoverAlone makes this node's replica the only voter of its group,
// giving up req.NodeId and req.Lost, in generation req.Generation of the
// shard (docs/adr/013; forced, docs/adr/014). It is sent to the survivor,
// not to a leader: a group that lost its quorum has none. A forced
// recovery is refused while the group has a leader, and done once the
// replica is alone in that generation.
func (s *Service) recoverAlone(g *shard.Group, req *peerv1.ChangeReplicasRequest) (*peerv1.ChangeReplicasResponse, error) {
	lost := slices.Clone(req.Lost)
	if req.NodeId != "" && !slices.Contains(lost, req.NodeId) {
		lost = append(lost, req.NodeId)
	}
	if len(lost) == 0 && !req.Force {
		return nil, toStatus(ErrNodeIDRequired)
	}
	sh, _ := shardOf(req.Shard)
	gen := req.Generation
	if gen == 0 && s.catalog != nil {
		// A catalog leader of an older build names no generation: the
		// recovery starts the next one all the same, as the map will.
		m, _ := s.catalog.Map()
		gen = m.Generation(sh) + 1
	}
	if req.Force && !alone(g) {
		if l := g.Leader(); l != "" {
			return nil, toStatus(fmt.Errorf("%w: %s is led by %s", ErrHasLeader, sh, l))
		}
	}
	if req.Force && alone(g) && g.Generation() >= gen {
		return &peerv1.ChangeReplicasResponse{}, nil // done already
	}
	if err := s.local.RecoverAlone(sh, recovery.Options{Lost: lost, Force: req.Force}, gen); err != nil {
		if errors.Is(err, shard.ErrUnsafeRecovery) || errors.Is(err, recovery.ErrNoState) {
			return nil, toStatus(fmt.Errorf("%w: %w", ErrUnsafeRecovery, err))
		}
		return nil, toStatus(unavailable(err))
	}
	return &peerv1.ChangeReplicasResponse{}, nil
}

// alone reports whether g's latest configuration is g's replica alone.
func alone(g *shard.Group) bool {
	cf := g.Raft().GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	srvs := cf.Configuration().Servers
	return len(srvs) == 1 && srvs[0].Suffrage == raft.Voter && string(srvs[0].ID) == g.NodeID()
}

// RecoverShard implements peerv1.NodeServer.
func (s *Service) RecoverShard(ctx context.Context, req *peerv1.RecoverShardRequest) (*peerv1.RecoverShardResponse, error) {
	sh, err := shardOf(req.Shard)
	if err != nil {
		return nil, err
	}
	if req.NodeId == "" {
		return nil, toStatus(ErrNodeIDRequired)
	}
	rec, err := s.catalog.RecoverShard(ctx, sh, req.NodeId, req.Force)
	if err != nil {
		return nil, toStatus(err)
	}
	return RecoveryToProto(rec), nil
}

// RecoveryToProto converts a catalog.Recovery.
func RecoveryToProto(r catalog.Recovery) *peerv1.RecoverShardResponse {
	out := &peerv1.RecoverShardResponse{
		Shard: ref(r.Shard), NodeId: r.Node, Voters: r.Voters, Lost: r.Lost, Warnings: r.Warnings,
		Recovered: r.Recovered, PlacementEpoch: r.Epoch, Generation: r.Generation,
	}
	for _, rep := range r.Replicas {
		pr := &peerv1.RecoveryReplica{NodeId: rep.Node, Voter: rep.Voter, Alive: rep.Alive, MemberState: rep.MemberState, State: "unreachable"}
		if rep.Reachable {
			pr.State = "not hosted"
			if rs := rep.Status; rs.Hosted {
				pr.State, pr.Term, pr.LastIndex, pr.LastLogTerm = rs.State, rs.Term, rs.LastIndex, rs.LastLogTerm
				pr.CommitIndex, pr.AppliedIndex, pr.Leader = rs.CommitIndex, rs.AppliedIndex, rs.Leader
			}
		}
		out.Replicas = append(out.Replicas, pr)
	}
	return out
}

// Shards implements catalog.Shards over the peer service.
type Shards struct {
	Pool *Pool
}

var _ catalog.Shards = Shards{}

func ref(s placement.Shard) *peerv1.ShardRef {
	return &peerv1.ShardRef{Keyspace: s.Keyspace, Shard: s.ID}
}

// Hosted implements catalog.Shards.
func (x Shards) Hosted(ctx context.Context, s placement.Shard, n catalog.Node, gen uint64) (bool, error) {
	c, err := x.Pool.Node(n.PeerAddr)
	if err != nil {
		return false, err
	}
	st, err := c.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)})
	if err != nil {
		return false, err
	}
	return st.Hosted && st.Generation >= gen, nil
}

// Status implements catalog.Shards.
func (x Shards) Status(ctx context.Context, s placement.Shard, n catalog.Node) (catalog.ReplicaStatus, error) {
	c, err := x.Pool.Node(n.PeerAddr)
	if err != nil {
		return catalog.ReplicaStatus{}, err
	}
	st, err := c.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)})
	if err != nil {
		return catalog.ReplicaStatus{}, err
	}
	return catalog.ReplicaStatus{
		Hosted: st.Hosted, State: st.State, Leader: st.LeaderId, Term: st.Term,
		LastIndex: st.LastIndex, LastLogTerm: st.LastLogTerm, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		Generation: st.Generation, Voters: st.Voters, Learners: st.Learners,
	}, nil
}

// leader finds the shard leader among replicas.
func (x Shards) leader(ctx context.Context, s placement.Shard, replicas []catalog.Node) (peerv1.NodeClient, *peerv1.ReplicaStatusResponse, error) {
	for _, n := range replicas {
		c, err := x.Pool.Node(n.PeerAddr)
		if err != nil {
			continue
		}
		st, err := c.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)})
		if err != nil || !st.Hosted || st.LeaderAddr == "" {
			continue
		}
		if st.State == raft.Leader.String() {
			return c, st, nil
		}
		lc, err := x.Pool.Node(st.LeaderAddr)
		if err != nil {
			continue
		}
		if lst, err := lc.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)}); err == nil && lst.State == raft.Leader.String() {
			return lc, lst, nil
		}
	}
	return nil, nil, errors.New("peer: no leader found for " + s.String())
}

func (x Shards) change(ctx context.Context, s placement.Shard, replicas []catalog.Node, n catalog.Node, op peerv1.ChangeReplicasRequest_Op) error {
	c, _, err := x.leader(ctx, s, replicas)
	if err != nil {
		return err
	}
	_, err = c.ChangeReplicas(ctx, &peerv1.ChangeReplicasRequest{Shard: ref(s), Op: op, NodeId: n.ID, PeerAddr: n.PeerAddr})
	return err
}

// AddLearner implements catalog.Shards.
func (x Shards) AddLearner(ctx context.Context, s placement.Shard, replicas []catalog.Node, n catalog.Node) error {
	return x.change(ctx, s, replicas, n, peerv1.ChangeReplicasRequest_OP_ADD_LEARNER)
}

// Promote implements catalog.Shards.
func (x Shards) Promote(ctx context.Context, s placement.Shard, replicas []catalog.Node, n catalog.Node) error {
	return x.change(ctx, s, replicas, n, peerv1.ChangeReplicasRequest_OP_PROMOTE)
}

// Remove implements catalog.Shards.
func (x Shards) Remove(ctx context.Context, s placement.Shard, replicas []catalog.Node, n catalog.Node) error {
	return x.change(ctx, s, replicas, n, peerv1.ChangeReplicasRequest_OP_REMOVE)
}

// RecoverAlone implements catalog.Shards: survivor's replica goes on as
// the only voter of s, giving up lost, in generation gen of s.
func (x Shards) RecoverAlone(ctx context.Context, s placement.Shard, survivor catalog.Node, lost []string, force bool, gen uint64) error {
	c, err := x.Pool.Node(survivor.PeerAddr)
	if err != nil {
		return err
	}
	req := &peerv1.ChangeReplicasRequest{Shard: ref(s), Op: peerv1.ChangeReplicasRequest_OP_RECOVER_ALONE, Lost: lost, Force: force, Generation: gen}
	if len(lost) == 1 {
		req.NodeId = lost[0] // what a node of an older build reads
	}
	_, err = c.ChangeReplicas(ctx, req)
	return err
}

// Leader implements catalog.Shards.
func (x Shards) Leader(ctx context.Context, s placement.Shard, replicas []catalog.Node) (string, error) {
	_, st, err := x.leader(ctx, s, replicas)
	if err != nil {
		return "", err
	}
	return st.LeaderId, nil
}

// TransferLeader implements catalog.Shards.
func (x Shards) TransferLeader(ctx context.Context, s placement.Shard, replicas []catalog.Node, to catalog.Node) error {
	// A replica that failed its group's last consistency check hands the
	// leadership over at its next check and serves no reads meanwhile:
	// the shard's STRONG reads and CAS would fail until then.
	if c, err := x.Pool.Node(to.PeerAddr); err == nil {
		if st, err := c.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)}); err == nil && st.FailedCheck {
			return fmt.Errorf("%w: %s of %s", catalog.ErrLeaderRefused, to.ID, s)
		}
	}
	err := x.change(ctx, s, replicas, to, peerv1.ChangeReplicasRequest_OP_TRANSFER_LEADER)
	if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), ErrTargetCorrupt.Error()) {
		return fmt.Errorf("%w: %s of %s: %v", catalog.ErrLeaderRefused, to.ID, s, err)
	}
	if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), ErrTargetSilent.Error()) {
		return fmt.Errorf("%w: %s of %s: %v", catalog.ErrLeaderNotYet, to.ID, s, err)
	}
	if status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), transport.ErrStopping.Error()) {
		// The target stops (it still gossips while it finishes its
		// requests in flight); it is not alive for the next rounds.
		return fmt.Errorf("%w: %s of %s: %v", catalog.ErrLeaderNotYet, to.ID, s, err)
	}
	return err
}

// CaughtUp implements catalog.Shards: the learner has applied at least the
// leader's commit index as of the call.
func (x Shards) CaughtUp(ctx context.Context, s placement.Shard, replicas []catalog.Node, n catalog.Node) (bool, error) {
	_, lst, err := x.leader(ctx, s, replicas)
	if err != nil {
		return false, err
	}
	c, err := x.Pool.Node(n.PeerAddr)
	if err != nil {
		return false, err
	}
	st, err := c.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref(s)})
	if err != nil {
		return false, err
	}
	return st.Hosted && st.AppliedIndex >= lst.CommitIndex, nil
}

// Nodes implements catalog.Notifier over the peer service.
type Nodes struct {
	Pool *Pool
	// Site and NodeID are this node's, the catalog leader's that tells.
	Site, NodeID string
}

var _ catalog.Notifier = Nodes{}

// NodeRemoved implements catalog.Notifier.
func (x Nodes) NodeRemoved(ctx context.Context, n catalog.Node, r catalog.RemovedNode) error {
	c, err := x.Pool.Node(n.PeerAddr)
	if err != nil {
		return err
	}
	// The node came back at an address whose connection failed while it
	// was down: wait (within ctx) for the pool to reconnect rather than
	// fail at once with the old connection's error.
	_, err = c.NodeRemoved(ctx, &peerv1.NodeRemovedRequest{NodeId: n.ID, Site: x.Site, Epoch: r.Epoch, RemovedBy: r.By, LeaderId: x.NodeID},
		grpc.WaitForReady(true))
	return err
}
