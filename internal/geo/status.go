package geo

import (
	"context"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/rpc"
)

// Status adapts the service to the Geo admin API (rpc.ChainStatus).
type Status struct{ S *Service }

var _ rpc.ChainStatus = Status{}

// Lag implements rpc.ChainStatus.
func (a Status) Lag(site string) rpc.SiteLag {
	sec, n, skipped := a.S.lagOf(site)
	rtt, ok := a.S.RTT(site)
	state := "up"
	switch {
	case skipped:
		state = "skipped"
	case !ok:
		state = "unreachable"
	}
	if !ok {
		rtt = 0 // the last round trip measured says nothing of a site out of reach
	}
	return rpc.SiteLag{State: state, RTTSeconds: rtt.Seconds(), LagSeconds: sec, LagEntries: n}
}

// Unreached implements rpc.ChainStatus.
func (a Status) Unreached(site string) time.Duration { return a.S.unreached(site) }

var _ rpc.JoinStatus = Status{}

// Join implements rpc.JoinStatus.
func (a Status) Join(ctx context.Context, keyspace string) rpc.JoinProgress {
	p := a.S.JoinStatus(ctx, keyspace)
	return rpc.JoinProgress{Complete: p.Complete, Done: p.Done, Shards: p.Shards, Waiting: p.Waiting}
}

// Repair implements rpc.ChainStatus.
func (a Status) Repair(ctx context.Context, keyspace string, shard *uint32, progress func(*adminv1.RepairProgress)) error {
	return a.S.RepairAll(ctx, keyspace, shard, progress)
}
