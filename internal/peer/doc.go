// Package peer is node-to-node plumbing inside a site: a pool of gRPC
// connections to other nodes' peer ports, the internal peer.v1 Node service
// (shard scans, replica status, raft configuration changes, drain, node
// removal), the implementation of catalog.Shards that carries out placement
// steps on shard groups through their leaders, and that of catalog.Notifier
// that tells a node its site removed it. The Node service's errors map to gRPC
// codes in one table (errors.go).
package peer
