package client

import (
	"context"
	"fmt"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// Sites lists every site of the cluster as the node that serves the call
// sees it: the site's state ("local", "up", "unreachable" or "skipped"),
// its nodes, the measured round trip to it and the replication lag
// towards it, and whether it holds a vote of the cluster configuration.
func (c *Client) Sites(ctx context.Context, opts ...Option) (*adminv1.SitesResponse, error) {
	o := c.options(opts)
	var resp *adminv1.SitesResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].Sites(ctx, &adminv1.SitesRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: sites: %w", err)
	}
	return resp, nil
}

// CreateKeyspace creates a keyspace of shards shards held by sites (in
// chain order). Every site that holds it creates its shards. It fails with
// codes.AlreadyExists, InvalidArgument (bad name, shard count or site
// list) or Unavailable (the cluster configuration has no leader the node
// can reach).
func (c *Client) CreateKeyspace(ctx context.Context, name string, shards uint32, sites []string, opts ...Option) (*adminv1.Keyspace, error) {
	o := c.options(opts)
	var resp *adminv1.KeyspaceResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: name, Shards: shards, Sites: sites})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: create keyspace: %w", err)
	}
	return resp.GetKeyspace(), nil
}

// ListKeyspaces lists every keyspace of the cluster, sorted by name.
func (c *Client) ListKeyspaces(ctx context.Context, opts ...Option) ([]*adminv1.Keyspace, error) {
	o := c.options(opts)
	var resp *adminv1.ListKeyspacesResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].ListKeyspaces(ctx, &adminv1.ListKeyspacesRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: list keyspaces: %w", err)
	}
	return resp.GetKeyspaces(), nil
}

// GetKeyspace describes one keyspace (codes.NotFound if there is none).
func (c *Client) GetKeyspace(ctx context.Context, name string, opts ...Option) (*adminv1.Keyspace, error) {
	o := c.options(opts)
	var resp *adminv1.KeyspaceResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].GetKeyspace(ctx, &adminv1.GetKeyspaceRequest{Name: name})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: get keyspace: %w", err)
	}
	return resp.GetKeyspace(), nil
}

// SetKeyspaceSites changes the sites that hold a keyspace; the list's
// order is the chain order. The default keyspace lives on every site and
// cannot be changed.
func (c *Client) SetKeyspaceSites(ctx context.Context, name string, sites []string, opts ...Option) (*adminv1.Keyspace, error) {
	o := c.options(opts)
	var resp *adminv1.KeyspaceResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: name, Sites: sites, Force: o.force})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: set keyspace sites: %w", err)
	}
	return resp.GetKeyspace(), nil
}

// RemoveSite removes a site that is gone for good from the cluster: from
// the cluster configuration (its vote) and from every keyspace, the
// default one included. Its name is never taken back, and a node of it
// that comes back stops. The answering node refuses (FAILED_PRECONDITION)
// a site it reaches, and its own.
func (c *Client) RemoveSite(ctx context.Context, site string, opts ...Option) (*adminv1.RemoveSiteResponse, error) {
	o := c.options(opts)
	var resp *adminv1.RemoveSiteResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		resp, err = c.geo[ep].RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: site})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: remove site: %w", err)
	}
	return resp, nil
}
