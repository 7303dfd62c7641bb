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

// Members lists the nodes of the site of the node that serves the call:
// their gossip state (alive, suspect, dead, left, or unknown for a node
// the catalog knows but gossip does not report), addresses, whether they
// drain and how many shard replicas the placement map assigns them. The
// reply also carries the placement epoch and the catalog leader. Any node
// of the site answers the same (up to gossip propagation), so the call
// fails over between endpoints unless pinned with WithEndpoint.
func (c *Client) Members(ctx context.Context, opts ...Option) (*adminv1.MembersResponse, error) {
	o := c.options(opts)
	var resp *adminv1.MembersResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].Members(ctx, &adminv1.MembersRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: members: %w", err)
	}
	return resp, nil
}

// Shards lists the shards of keyspace (of every keyspace if keyspace is
// empty) with their replicas from the placement map, and each replica's
// raft state as reported by the node that holds it ("unreachable" if that
// node did not answer). An unknown keyspace fails with NotFound.
func (c *Client) Shards(ctx context.Context, keyspace string, opts ...Option) (*adminv1.ShardsResponse, error) {
	o := c.options(opts)
	var resp *adminv1.ShardsResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].Shards(ctx, &adminv1.ShardsRequest{Keyspace: keyspace})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: shards: %w", err)
	}
	return resp, nil
}

// Drain marks node nodeID draining, so that the site moves every shard
// replica off it, or with undo lets it take replicas again. It returns
// the placement epoch that records the change; the replicas move
// afterwards (watch Members or Shards for progress). An unknown node fails
// with NotFound. Drain is idempotent, so it is retried like a read.
func (c *Client) Drain(ctx context.Context, nodeID string, undo bool, opts ...Option) (uint64, error) {
	if nodeID == "" {
		return 0, fmt.Errorf("client: drain: %w", invalidArgument("node id is required"))
	}
	o := c.options(opts)
	var resp *adminv1.DrainResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].Drain(ctx, &adminv1.DrainRequest{NodeId: nodeID, Undo: undo})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("client: drain: %w", err)
	}
	return resp.GetPlacementEpoch(), nil
}

// RemoveNode removes node nodeID, which is gone for good, from its site:
// the site catalog forgets it, Members no longer lists it, and its id is
// never taken back (a kvd that starts under it is refused or stopped; its
// machine comes back with an empty data directory and a new node id). It
// returns what the catalog recorded: the placement epoch of the removal
// and the node's last addresses. Any node of the site serves the call and
// forwards it to the catalog leader.
//
// It fails with FailedPrecondition for a node gossip reports alive or
// suspect, one the placement map still assigns shard replicas, and a voter
// of the site catalog (the message says which and what to do: the site
// replaces the replicas and the catalog seat of a node down for longer
// than its dead grace), and with NotFound for a node the site does not
// know or removed already. A retry after a lost reply can find the node
// removed already.
func (c *Client) RemoveNode(ctx context.Context, nodeID string, opts ...Option) (*adminv1.RemoveNodeResponse, error) {
	if nodeID == "" {
		return nil, fmt.Errorf("client: remove node: %w", invalidArgument("node id is required"))
	}
	o := c.options(opts)
	var resp *adminv1.RemoveNodeResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].RemoveNode(ctx, &adminv1.RemoveNodeRequest{NodeId: nodeID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: remove node: %w", err)
	}
	return resp, nil
}

// RecoverShard recovers shard shard of keyspace, whose replica group lost
// its quorum for good: node nodeID's replica goes on as the group's only
// voter, the placement map drops the other replicas, and the site grows
// the group back (docs/operations.md). Entries the lost replicas committed
// without nodeID are lost. Without force nothing changes: the reply
// describes the group (its replicas, which nodes are alive, each
// replica's log) and what would be given up. The node that serves the
// call answers a dry run from its copy of the site catalog; a forced
// recovery is carried out through the catalog leader.
//
// It fails with NotFound for an unknown keyspace or shard, and with
// FailedPrecondition when the shard has a leader or a live quorum (there
// is nothing to recover), or nodeID holds no replica of it or is not
// alive. A forced recovery interrupted half way is completed by calling
// it again.
func (c *Client) RecoverShard(ctx context.Context, keyspace string, shard uint32, nodeID string, force bool, opts ...Option) (*adminv1.RecoverShardResponse, error) {
	switch {
	case keyspace == "":
		return nil, fmt.Errorf("client: recover shard: %w", invalidArgument("keyspace is required"))
	case nodeID == "":
		return nil, fmt.Errorf("client: recover shard: %w", invalidArgument("node id is required"))
	}
	o := c.options(opts)
	var resp *adminv1.RecoverShardResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.admin[ep].RecoverShard(ctx, &adminv1.RecoverShardRequest{Keyspace: keyspace, Shard: shard, NodeId: nodeID, Force: force})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: recover shard: %w", err)
	}
	return resp, nil
}
