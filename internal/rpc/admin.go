package rpc

import (
	"context"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
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
			return nil, toStatus(err)
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
			return nil, toStatus(err)
		}
	}
	return &adminv1.SnapshotResponse{Snapshots: uint32(len(groups))}, nil
}
