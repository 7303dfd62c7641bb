package client

import (
	"context"
	"fmt"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// DebugPartition makes the node that serves the call (pin it with
// WithEndpoint) drop all its traffic to and from the nodes of site, and
// returns every site it is now cut off from. Test and demo only: the node
// must run kvd with --debug-faults, else the call fails with
// FailedPrecondition; an unknown site or the node's own fails with
// InvalidArgument.
func (c *Client) DebugPartition(ctx context.Context, site string, opts ...Option) ([]string, error) {
	o := c.options(opts)
	var resp *adminv1.DebugPartitionResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = adminv1.NewGeoClient(c.conns[ep]).DebugPartition(ctx, &adminv1.DebugPartitionRequest{Site: site})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: debug partition: %w", err)
	}
	return resp.GetPartitionedSites(), nil
}

// DebugHeal undoes every DebugPartition of the node that serves the call.
func (c *Client) DebugHeal(ctx context.Context, opts ...Option) error {
	o := c.options(opts)
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) error {
		_, err := adminv1.NewGeoClient(c.conns[ep]).DebugHeal(ctx, &adminv1.DebugHealRequest{})
		return err
	})
	if err != nil {
		return fmt.Errorf("client: debug heal: %w", err)
	}
	return nil
}
