package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/router"
)

// SiteLag is the replication state from this node towards one site.
type SiteLag struct {
	// State: "up", "unreachable" or "skipped".
	State string
	// RTTSeconds is the last measured round trip (0 if unknown).
	RTTSeconds float64
	// LagSeconds is the age of the oldest update not yet applied there;
	// LagEntries counts the updates that wait.
	LagSeconds float64
	LagEntries uint64
}

// ChainStatus reports replication towards other sites and runs
// anti-entropy (internal/geo).
type ChainStatus interface {
	Lag(site string) SiteLag
	// Unreached returns how long this node has tried to reach site and
	// failed (0: it reached the site within the last ping rounds, or has
	// not tried for that long).
	Unreached(site string) time.Duration
	// Repair runs anti-entropy for keyspace (every keyspace if empty),
	// or one shard of it, calling progress after each shard.
	Repair(ctx context.Context, keyspace string, shard *uint32, progress func(*adminv1.RepairProgress)) error
}

// Repair implements adminv1.GeoServer.
func (g *Geo) Repair(req *adminv1.RepairRequest, stream adminv1.Geo_RepairServer) error {
	if g.deps.Chain == nil {
		return adminStatus(ErrNoChains)
	}
	var only *uint32
	if req.HasShard {
		v := req.Shard
		only = &v
	}
	err := g.deps.Chain.Repair(stream.Context(), req.Keyspace, only, func(p *adminv1.RepairProgress) { _ = stream.Send(p) })
	if err != nil && stream.Context().Err() == nil {
		if errors.Is(err, router.ErrUnknownKeyspace) || errors.Is(err, ErrUnknownShard) {
			return adminStatus(err) // NotFound, as from every other call
		}
		return adminStatus(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	return err
}
