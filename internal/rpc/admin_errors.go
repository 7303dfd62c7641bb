package rpc

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/catalog"
)

// Errors of the Admin service.
var (
	// ErrNoCluster: the node runs without a site catalog, so the site-wide
	// calls (Members, Shards, Drain, RemoveNode) are not available.
	ErrNoCluster = errors.New("admin: no cluster")
	// ErrNodeIDRequired: the request names no node.
	ErrNodeIDRequired = errors.New("admin: node_id is required")
	// ErrNoCatalogLeader: the site catalog has no leader. Retryable.
	ErrNoCatalogLeader = errors.New("admin: the site catalog has no leader")
	// ErrPeerUnavailable: the connection to another node of the site
	// failed. Retryable.
	ErrPeerUnavailable = errors.New("admin: peer unavailable")
	// ErrKeyspaceRequired: the request names no keyspace.
	ErrKeyspaceRequired = errors.New("admin: keyspace is required")
	// ErrUnknownShard: the keyspace has no shard of that number.
	ErrUnknownShard = errors.New("admin: unknown shard")
	// ErrNoChains: the node runs no chains of sites (Geo.Repair).
	ErrNoChains = errors.New("admin: this node runs no chains of sites")
	// ErrNoClusterConfig: the node has no cluster-wide configuration.
	ErrNoClusterConfig = errors.New("admin: this node has no cluster configuration")
	// ErrNoKeyspace: the cluster configuration has no such keyspace.
	ErrNoKeyspace = errors.New("admin: keyspace does not exist")
	// ErrSiteUnreachable: a keyspace change would remove a site that this
	// node cannot reach (Geo.SetKeyspaceSites without force).
	ErrSiteUnreachable = errors.New("admin: a site to remove from the keyspace is unreachable")
	// ErrSiteRequired: the request names no site.
	ErrSiteRequired = errors.New("admin: site is required")
	// ErrNoSite: the cluster configuration has no such site.
	ErrNoSite = errors.New("admin: no such site")
	// ErrSiteReachable: a site to remove from the cluster answers the
	// serving node, or is its own (Geo.RemoveSite).
	ErrSiteReachable = errors.New("admin: the site to remove from the cluster answers")
	// ErrNoDebugFaults: the debug partition commands need a node started
	// with --debug-faults.
	ErrNoDebugFaults = errors.New("admin: start kvd with --debug-faults (test and demo only)")
)

// adminCodeTable maps the Admin service's own errors to gRPC codes; the
// errors it shares with the KV service (unknown keyspace, shard failures)
// map through codeTable.
var adminCodeTable = []struct {
	err  error
	code codes.Code
}{
	{ErrNoCluster, codes.Unimplemented},
	{ErrNodeIDRequired, codes.InvalidArgument},
	{ErrNoCatalogLeader, codes.Unavailable},
	{ErrPeerUnavailable, codes.Unavailable},
	{ErrKeyspaceRequired, codes.InvalidArgument},
	{ErrUnknownShard, codes.NotFound},
	{ErrNoChains, codes.FailedPrecondition},
	{ErrNoClusterConfig, codes.FailedPrecondition},
	{ErrNoKeyspace, codes.NotFound},
	{ErrNoDebugFaults, codes.FailedPrecondition},
	{ErrSiteUnreachable, codes.FailedPrecondition},
	{ErrSiteRequired, codes.InvalidArgument},
	{ErrNoSite, codes.NotFound},
	{ErrSiteReachable, codes.FailedPrecondition},
	{catalog.ErrUnknownShard, codes.NotFound},
	{catalog.ErrNotReplica, codes.FailedPrecondition},
	{catalog.ErrNodeDown, codes.FailedPrecondition},
	{catalog.ErrNoReplicaState, codes.FailedPrecondition},
	{catalog.ErrNothingToRecover, codes.FailedPrecondition},
	{catalog.ErrStaleGeneration, codes.Aborted},
	{catalog.ErrNotLeader, codes.Unavailable},
	{catalog.ErrUnknownNode, codes.NotFound},
	{catalog.ErrNodeRemoved, codes.NotFound},
	{catalog.ErrNodeNotDown, codes.FailedPrecondition},
	{catalog.ErrNodeHasReplicas, codes.FailedPrecondition},
	{catalog.ErrCatalogVoter, codes.FailedPrecondition},
}

// adminStatus converts an error of an Admin handler to a gRPC status
// error.
func adminStatus(err error) error {
	for _, e := range adminCodeTable {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	return toStatus(err)
}

// peerUnavailable wraps a failure to reach another node.
func peerUnavailable(err error) error {
	return fmt.Errorf("%w: %w", ErrPeerUnavailable, err)
}
