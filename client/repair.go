package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// RepairOptions select what Repair compares: every keyspace of the site
// (Keyspace empty), one keyspace, or one shard of it.
type RepairOptions struct {
	Keyspace string
	// Shard, if not nil, limits the repair to that shard of Keyspace.
	Shard *uint32
}

// Repair runs anti-entropy now from the first endpoint (or the one given
// with WithEndpoint), bounded by ctx alone towards every other site holding the keyspaces: for
// each shard it leads, it compares digests with each other site and sends
// the newest versions of what differs. progress is called after each
// shard and site. Shards the node does not lead are reported with an
// error naming why; run the repair on every node of the site to cover all.
// An unknown keyspace fails with NotFound.
func (c *Client) Repair(ctx context.Context, ro RepairOptions, progress func(*adminv1.RepairProgress), opts ...Option) error {
	if ro.Shard != nil && ro.Keyspace == "" {
		return errors.New("client: repair: a shard needs its keyspace")
	}
	if c.closed.Load() {
		return fmt.Errorf("client: repair: %w", ErrClosed)
	}
	o := c.options(opts)
	req := &adminv1.RepairRequest{Keyspace: ro.Keyspace}
	if ro.Shard != nil {
		req.HasShard, req.Shard = true, *ro.Shard
	}
	ep := 0
	if o.endpoint != "" {
		ep = slices.Index(c.cfg.Endpoints, o.endpoint)
		if ep < 0 {
			return invalidArgument("endpoint %q is not configured", o.endpoint)
		}
	}
	// One stream, bounded by ctx alone: a repair outlasts RequestTimeout.
	err := func() error {
		stream, err := adminv1.NewGeoClient(c.conns[ep]).Repair(ctx, req)
		if err != nil {
			return err
		}
		for {
			p, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if progress != nil {
				progress(p)
			}
		}
	}()
	if err != nil {
		if c.closed.Load() && ctx.Err() == nil && closedUnder(err) {
			err = errClosedInFlight(err)
		}
		return fmt.Errorf("client: repair: %w", err)
	}
	return nil
}
