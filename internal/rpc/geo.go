package rpc

import (
	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// GeoDeps are the parts of a node the Geo admin service reads and drives.
// A nil part answers its methods with UNAVAILABLE or FAILED_PRECONDITION.
type GeoDeps struct {
	// Site is the serving node's site.
	Site string
	// Cluster is the cluster-wide configuration (geo_cluster.go).
	Cluster ClusterConfig
	// Faults is the node's fault layer for the debug partition commands
	// (geo_debug.go).
	Faults SiteFaults
	// Chain reports replication towards other sites and runs
	// anti-entropy (geo_chain.go).
	Chain ChainStatus
	// Unheard, if set, says why the node may not know every keyspace of
	// the cluster, or returns "" (router.Config.Unheard).
	Unheard func() string
}

// Geo implements adminv1.GeoServer: sites, keyspaces, anti-entropy and the
// test-and-demo network faults.
type Geo struct {
	adminv1.UnimplementedGeoServer
	deps    GeoDeps
	metrics *Metrics
}

// NewGeo returns the Geo admin service.
func NewGeo(deps GeoDeps, m *Metrics) *Geo {
	return &Geo{deps: deps, metrics: m}
}
