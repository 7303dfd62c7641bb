package rpc

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/hashicorp/raft"
	grpcpeer "google.golang.org/grpc/peer"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// Version is the build's version string, set by the linker.
var Version = "dev"

// Admin implements adminv1.AdminServer.
type Admin struct {
	adminv1.UnimplementedAdminServer
	cfg        Config
	clientAddr string
	router     *router.Router
	db         *storage.DB
	started    time.Time
	metrics    *Metrics
	cluster    *Cluster
}

// NewAdmin returns the operator service.
func NewAdmin(cfg Config, clientAddr string, r *router.Router, db *storage.DB, m *Metrics) *Admin {
	return &Admin{cfg: cfg, clientAddr: clientAddr, router: r, db: db, started: time.Now(), metrics: m}
}

// Status implements adminv1.AdminServer.
func (a *Admin) Status(ctx context.Context, _ *adminv1.StatusRequest) (resp *adminv1.StatusResponse, err error) {
	defer a.metrics.observe("status", time.Now(), &err)
	resp = &adminv1.StatusResponse{
		Site:          a.cfg.Site,
		NodeId:        a.cfg.NodeID,
		Version:       Version,
		ClientAddr:    a.clientAddr,
		UptimeSeconds: uint64(time.Since(a.started).Seconds()),
		Keyspaces:     a.router.Keyspaces(),
		StorageBytes:  uint64(a.db.Size()),
	}
	for _, g := range a.router.Groups() {
		st := g.Status()
		resp.Shards = append(resp.Shards, &adminv1.ShardStatus{
			Keyspace:          st.ID.Keyspace,
			Shard:             st.ID.Shard,
			State:             st.State,
			Leader:            st.Leader,
			Term:              st.Term,
			CommitIndex:       st.CommitIndex,
			AppliedIndex:      st.AppliedIndex,
			LastSnapshotIndex: st.LastSnapshotIndex,
		})
	}
	return resp, nil
}

// Snapshot implements adminv1.AdminServer.
func (a *Admin) Snapshot(ctx context.Context, req *adminv1.SnapshotRequest) (resp *adminv1.SnapshotResponse, err error) {
	defer a.metrics.observe("snapshot", time.Now(), &err)
	if req.Keyspace != "" {
		if _, err := a.router.Shards(req.Keyspace); err != nil {
			return nil, adminStatus(err)
		}
	}
	var groups []*shard.Group
	for _, g := range a.router.Groups() {
		if req.Keyspace == "" || g.ID().Keyspace == req.Keyspace {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		if err := g.Snapshot(ctx); err != nil {
			return nil, adminStatus(err)
		}
	}
	return &adminv1.SnapshotResponse{Snapshots: uint32(len(groups))}, nil
}

// Cluster is what the admin service needs to describe a multi-node site.
type Cluster struct {
	Catalog *catalog.Catalog
	Members *membership.Membership
	Pool    *peer.Pool
}

// WithCluster enables the site-wide calls (Members, Shards, Drain,
// RemoveNode, RecoverShard).
func (a *Admin) WithCluster(c Cluster) *Admin {
	a.cluster = &c
	return a
}

// Members implements adminv1.AdminServer.
func (a *Admin) Members(ctx context.Context, _ *adminv1.MembersRequest) (resp *adminv1.MembersResponse, err error) {
	defer a.metrics.observe("members", time.Now(), &err)
	if a.cluster == nil {
		return nil, adminStatus(ErrNoCluster)
	}
	st, _ := a.cluster.Catalog.State()
	counts := map[string]uint32{}
	for _, reps := range st.Map.Shards {
		for _, r := range reps {
			counts[string(r.Node)]++
		}
	}
	leader, _ := a.cluster.Catalog.Leader()
	// The replicas per shard the site places: the largest --replicas of
	// this node and the alive nodes of the site that announce theirs in
	// gossip, as the catalog leader counts them (catalog.siteReplicas),
	// not this node's own value.
	replicas := max(a.cluster.Catalog.Replicas(), 0)
	resp = &adminv1.MembersResponse{PlacementEpoch: st.Map.Epoch, CatalogLeader: leader}
	seen := map[string]bool{}
	for _, m := range a.cluster.Members.Members() {
		if m.Site != a.cfg.Site {
			continue
		}
		if m.State == membership.StateAlive {
			replicas = max(replicas, int(m.Replicas))
		}
		// A node removed for good is no member any more, unless a process
		// runs under its id again (the catalog leader tells it to stop).
		if _, removed := st.Removed[m.NodeID]; removed && m.State != membership.StateAlive && m.State != membership.StateSuspect {
			continue
		}
		seen[m.NodeID] = true
		resp.Members = append(resp.Members, &adminv1.Member{
			Site: m.Site, NodeId: m.NodeID, State: m.State.String(), ClientAddr: m.ClientAddr, PeerAddr: m.PeerAddr,
			GossipAddr: m.GossipAddr, Draining: st.Nodes[m.NodeID].Draining, Replicas: counts[m.NodeID],
		})
	}
	for id, n := range st.Nodes {
		if !seen[id] {
			resp.Members = append(resp.Members, &adminv1.Member{Site: a.cfg.Site, NodeId: id, State: "unknown", ClientAddr: n.ClientAddr, PeerAddr: n.PeerAddr, Draining: n.Draining, Replicas: counts[id]})
		}
	}
	sort.Slice(resp.Members, func(i, j int) bool { return resp.Members[i].NodeId < resp.Members[j].NodeId })
	resp.ReplicasPerShard = uint32(replicas)
	return resp, nil
}

// Shards implements adminv1.AdminServer.
func (a *Admin) Shards(ctx context.Context, req *adminv1.ShardsRequest) (resp *adminv1.ShardsResponse, err error) {
	defer a.metrics.observe("shards", time.Now(), &err)
	if a.cluster == nil {
		return nil, adminStatus(ErrNoCluster)
	}
	if req.Keyspace != "" {
		if _, err := a.router.Shards(req.Keyspace); err != nil {
			return nil, adminStatus(err)
		}
	}
	st, _ := a.cluster.Catalog.State()
	resp = &adminv1.ShardsResponse{PlacementEpoch: st.Map.Epoch}
	// Nodes gossip reports down are not asked: a call to one may hang
	// until its timeout. The others are asked concurrently, so a slow
	// node costs the call one timeout, not one per replica it holds.
	down := map[string]bool{}
	for _, m := range a.cluster.Members.Members() {
		if m.Site == a.cfg.Site && (m.State == membership.StateDead || m.State == membership.StateLeft) {
			down[m.NodeID] = true
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, shardsStatusConcurrency)
	var views [][]replicaView // per shard, what each replica said
	for _, sh := range st.Map.SortedShards() {
		if req.Keyspace != "" && sh.Keyspace != req.Keyspace {
			continue
		}
		info := &adminv1.ShardInfo{Keyspace: sh.Keyspace, Shard: sh.ID}
		named := make([]replicaView, len(st.Map.Shards[sh]))
		views = append(views, named)
		for i, r := range st.Map.Shards[sh] {
			rep := &adminv1.ShardReplica{NodeId: string(r.Node), Voter: r.Voter, State: "unreachable"}
			info.Replicas = append(info.Replicas, rep)
			n, ok := st.Nodes[string(r.Node)]
			if !ok || down[string(r.Node)] {
				continue
			}
			c, err := a.cluster.Pool.Node(n.PeerAddr)
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-sem }()
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				rs, err := c.ReplicaStatus(cctx, &peerv1.ReplicaStatusRequest{Shard: &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID}})
				cancel()
				if err == nil && rs.Hosted {
					rep.State, rep.CommitIndex, rep.AppliedIndex = rs.State, rs.CommitIndex, rs.AppliedIndex
					named[i] = replicaView{leader: rs.LeaderId, leads: rs.State == raft.Leader.String()}
				} else if err == nil {
					rep.State = "opening"
				}
			}()
		}
		resp.Shards = append(resp.Shards, info)
	}
	wg.Wait()
	for i, info := range resp.Shards {
		// The replica that leads (its own word beats what a follower
		// last heard), else the first one that names a leader.
		for j, v := range views[i] {
			if v.leads {
				info.Leader = info.Replicas[j].NodeId
				break
			}
			if v.leader != "" && info.Leader == "" {
				info.Leader = v.leader
			}
		}
	}
	return resp, nil
}

// replicaView is what one replica's ReplicaStatus said of its shard's
// leadership.
type replicaView struct {
	leader string // the leader it names
	leads  bool   // it leads
}

// shardsStatusConcurrency bounds the ReplicaStatus calls one Shards call
// has in flight.
const shardsStatusConcurrency = 32

// catalogLeader returns a client of the site catalog leader's Node
// service, or the admin status saying why there is none.
func (a *Admin) catalogLeader() (peerv1.NodeClient, error) {
	_, addr := a.cluster.Catalog.Leader()
	if addr == "" {
		return nil, adminStatus(ErrNoCatalogLeader)
	}
	c, err := a.cluster.Pool.Node(addr)
	if err != nil {
		return nil, adminStatus(peerUnavailable(err))
	}
	return c, nil
}

// Drain implements adminv1.AdminServer.
func (a *Admin) Drain(ctx context.Context, req *adminv1.DrainRequest) (resp *adminv1.DrainResponse, err error) {
	defer a.metrics.observe("drain", time.Now(), &err)
	if a.cluster == nil {
		return nil, adminStatus(ErrNoCluster)
	}
	if req.NodeId == "" {
		return nil, adminStatus(ErrNodeIDRequired)
	}
	c, err := a.catalogLeader()
	if err != nil {
		return nil, err
	}
	dr, err := c.Drain(ctx, &peerv1.DrainRequest{NodeId: req.NodeId, Draining: !req.Undo})
	if err != nil {
		return nil, err
	}
	return &adminv1.DrainResponse{PlacementEpoch: dr.Epoch}, nil
}

// RemoveNode implements adminv1.AdminServer: the catalog leader decides
// (catalog.RemoveNode); this node forwards the call to it, naming the
// client, and returns its answer.
func (a *Admin) RemoveNode(ctx context.Context, req *adminv1.RemoveNodeRequest) (resp *adminv1.RemoveNodeResponse, err error) {
	defer a.metrics.observe("remove_node", time.Now(), &err)
	if a.cluster == nil {
		return nil, adminStatus(ErrNoCluster)
	}
	if req.NodeId == "" {
		return nil, adminStatus(ErrNodeIDRequired)
	}
	c, err := a.catalogLeader()
	if err != nil {
		return nil, err
	}
	by := "client via " + a.cfg.NodeID
	if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
		by = "client " + p.Addr.String() + " via " + a.cfg.NodeID
	}
	pr, err := c.RemoveNode(ctx, &peerv1.RemoveNodeRequest{NodeId: req.NodeId, RequestedBy: by})
	if err != nil {
		return nil, err // the catalog leader's status
	}
	return &adminv1.RemoveNodeResponse{PlacementEpoch: pr.Epoch, PeerAddr: pr.PeerAddr, ClientAddr: pr.ClientAddr}, nil
}

// RecoverShard implements adminv1.AdminServer. A dry run is answered from
// this node's copy of the site catalog; a forced recovery is carried out
// by the catalog leader, this node or the one it forwards to.
func (a *Admin) RecoverShard(ctx context.Context, req *adminv1.RecoverShardRequest) (resp *adminv1.RecoverShardResponse, err error) {
	defer a.metrics.observe("recover_shard", time.Now(), &err)
	if a.cluster == nil {
		return nil, adminStatus(ErrNoCluster)
	}
	if req.Keyspace == "" {
		return nil, adminStatus(ErrKeyspaceRequired)
	}
	shards, err := a.router.Shards(req.Keyspace)
	if err != nil {
		return nil, adminStatus(err)
	}
	if int(req.Shard) >= len(shards) {
		return nil, adminStatus(fmt.Errorf("%w %d of keyspace %q: it has shards 0 to %d", ErrUnknownShard, req.Shard, req.Keyspace, len(shards)-1))
	}
	if req.NodeId == "" {
		return nil, adminStatus(ErrNodeIDRequired)
	}
	cat := a.cluster.Catalog
	sh := placement.Shard{Keyspace: req.Keyspace, ID: req.Shard}
	if !req.Force || cat.IsLeader() {
		rec, err := cat.RecoverShard(ctx, sh, req.NodeId, req.Force)
		if err != nil {
			return nil, adminStatus(err)
		}
		return recoveryResponse(peer.RecoveryToProto(rec)), nil
	}
	// Forced: the catalog leader records the change. Refuse here first
	// what this node can tell is wrong.
	if _, err := cat.RecoverShard(ctx, sh, req.NodeId, false); err != nil {
		return nil, adminStatus(err)
	}
	_, addr := cat.Leader()
	if addr == "" {
		return nil, adminStatus(fmt.Errorf("%w: a forced recovery records its change in the placement map; "+
			"if the catalog lost its quorum for good, recover it first (kvd --recover-catalog, docs/operations.md)", ErrNoCatalogLeader))
	}
	c, err := a.cluster.Pool.Node(addr)
	if err != nil {
		return nil, adminStatus(peerUnavailable(err))
	}
	pr, err := c.RecoverShard(ctx, &peerv1.RecoverShardRequest{
		Shard: &peerv1.ShardRef{Keyspace: req.Keyspace, Shard: req.Shard}, NodeId: req.NodeId, Force: true,
	})
	if err != nil {
		return nil, err // the catalog leader's status
	}
	return recoveryResponse(pr), nil
}

// recoveryResponse converts the peer service's recovery report.
func recoveryResponse(p *peerv1.RecoverShardResponse) *adminv1.RecoverShardResponse {
	out := &adminv1.RecoverShardResponse{
		Keyspace: p.GetShard().GetKeyspace(), Shard: p.GetShard().GetShard(), NodeId: p.GetNodeId(),
		Voters: p.GetVoters(), Lost: p.GetLost(), Warnings: p.GetWarnings(), Recovered: p.GetRecovered(),
		PlacementEpoch: p.GetPlacementEpoch(), Generation: p.GetGeneration(),
	}
	for _, r := range p.GetReplicas() {
		out.Replicas = append(out.Replicas, &adminv1.RecoveryReplica{
			NodeId: r.GetNodeId(), Voter: r.GetVoter(), Alive: r.GetAlive(), MemberState: r.GetMemberState(),
			State: r.GetState(), Term: r.GetTerm(), LastIndex: r.GetLastIndex(), LastLogTerm: r.GetLastLogTerm(),
			CommitIndex: r.GetCommitIndex(), AppliedIndex: r.GetAppliedIndex(), Leader: r.GetLeader(),
		})
	}
	return out
}
