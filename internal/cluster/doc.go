// Package cluster holds the cluster-wide configuration: the sites, their
// nodes, and the keyspaces with their shard counts and site lists (chain
// order). See docs/adr/017-cluster-configuration.md.
package cluster
