package rpc

import (
	"context"

	"github.com/causeway-db/causeway/internal/cluster"
)

// ClusterConfig is the cluster-wide configuration as the Geo service
// needs it (internal/cluster).
type ClusterConfig interface {
	// Config returns the node's copy and a channel closed on its change.
	Config() (cluster.Config, <-chan struct{})
	// CreateKeyspace and SetKeyspaceSites change the configuration through
	// its leader and return the configuration after the change.
	CreateKeyspace(ctx context.Context, ks cluster.Keyspace) (cluster.Config, error)
	SetKeyspaceSites(ctx context.Context, name string, sites []string) (cluster.Config, error)
}
