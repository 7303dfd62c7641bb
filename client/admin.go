package client

import (
	"context"
	"fmt"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// Status describes the node that serves the call (pin it with WithEndpoint)
// and the shard replicas it hosts.
func (c *Client) Status(ctx context.Context, opts ...Option) (*adminv1.StatusResponse, error) {
	o := c.options(opts)
	var resp *adminv1.StatusResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].Status(ctx, &adminv1.StatusRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: status: %w", err)
	}
	return resp, nil
}

// Snapshot forces a raft snapshot (and log truncation) of the shard
// replicas hosted by the node that serves the call (pin it with
// WithEndpoint): those of keyspace, or of every keyspace if keyspace is
// empty. It returns the number of replicas snapshotted.
func (c *Client) Snapshot(ctx context.Context, keyspace string, opts ...Option) (int, error) {
	o := c.options(opts)
	var resp *adminv1.SnapshotResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].Snapshot(ctx, &adminv1.SnapshotRequest{Keyspace: keyspace})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("client: snapshot: %w", err)
	}
	return int(resp.GetSnapshots()), nil
}
