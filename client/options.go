package client

import (
	"math"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// Consistency selects how a read is served.
type Consistency int

const (
	// Causal reads from any replica that has applied everything the
	// session has seen of the key (causal+). It is the default.
	Causal Consistency = iota + 1
	// Strong reads are linearizable within the local site: served by the
	// shard leader once it knows it still leads, from its read lease or a
	// confirmation round (docs/adr/024-read-leases.md).
	Strong
)

// Durability selects when a mutation is acknowledged.
type Durability int

const (
	// DurabilityLocal acknowledges once the origin site's replica group has
	// committed and applied the write. It is the default.
	DurabilityLocal Durability = iota + 1
	// DurabilitySites acknowledges once the first N sites of the key's
	// chain applied the write; set N with WithMinSites.
	DurabilitySites
	// DurabilityAll acknowledges once every site of the keyspace applied
	// the write.
	DurabilityAll
)

// Option adjusts one call. Options that do not apply to a call (for
// example WithDurability on a Get) are ignored.
type Option func(*callOptions)

type callOptions struct {
	keyspace    string
	consistency Consistency
	durability  Durability
	minSites    uint32
	endpoint    string
	force       bool
	// mutation marks a call that writes (Put, Delete, CompareAndSwap,
	// CompareAndDelete): once one of its attempts may have reached a node,
	// it is retried only at that node's site (Client.invoke).
	mutation bool
	// read marks a call that only reads (Get, BatchGet, Scan, History,
	// GetTxn): any node may serve it again, so with other endpoints each
	// attempt is bounded to part of the caller's time (Client.invoke).
	read bool
}

// WithKeyspace makes the call use keyspace ks instead of Config.Keyspace.
func WithKeyspace(ks string) Option {
	return func(o *callOptions) { o.keyspace = ks }
}

// WithConsistency selects the consistency of a read (Get, BatchGet, Scan,
// ScanAll, History).
func WithConsistency(c Consistency) Option {
	return func(o *callOptions) { o.consistency = c }
}

// WithDurability selects when a mutation (Put, Delete, CompareAndSwap,
// CompareAndDelete) is acknowledged.
func WithDurability(d Durability) Option {
	return func(o *callOptions) { o.durability = d }
}

// WithMinSites makes a mutation wait until n sites applied it; it implies
// DurabilitySites. The mutation fails with InvalidArgument if n < 1 or n
// exceeds the keyspace's site count (an n too large for the request's
// 32-bit field is sent as the largest one, never truncated to a smaller
// count).
func WithMinSites(n int) Option {
	return func(o *callOptions) {
		o.durability = DurabilitySites
		o.minSites = uint32(min(max(int64(n), 0), math.MaxUint32))
	}
}

// WithEndpoint sends the call to one of Config.Endpoints only, without
// failover to the others (retries still apply). It is meant for per-node
// calls such as Status and Snapshot. A data call to a node of another
// site than the one that served the session last carries the whole
// session, as after a failover, so that the site checks only what the
// session observed.
func WithEndpoint(addr string) Option {
	return func(o *callOptions) { o.endpoint = addr }
}

func (c *Client) options(opts []Option) callOptions {
	o := callOptions{keyspace: c.cfg.Keyspace}
	for _, opt := range opts {
		opt(&o)
	}
	if o.keyspace == "" {
		o.keyspace = DefaultKeyspace
	}
	return o
}

func (o callOptions) protoConsistency() kvv1.Consistency {
	switch o.consistency {
	case 0:
		return kvv1.Consistency_CONSISTENCY_UNSPECIFIED
	case Causal:
		return kvv1.Consistency_CONSISTENCY_CAUSAL
	case Strong:
		return kvv1.Consistency_CONSISTENCY_STRONG
	}
	return kvv1.Consistency(o.consistency) // the server rejects unknown values
}

func (o callOptions) protoDurability() kvv1.Durability {
	switch o.durability {
	case 0:
		return kvv1.Durability_DURABILITY_UNSPECIFIED
	case DurabilityLocal:
		return kvv1.Durability_DURABILITY_LOCAL
	case DurabilitySites:
		return kvv1.Durability_DURABILITY_SITES
	case DurabilityAll:
		return kvv1.Durability_DURABILITY_ALL
	}
	return kvv1.Durability(o.durability) // the server rejects unknown values
}

// WithForce lets SetKeyspaceSites remove sites that the answering node
// cannot reach. Writes such a site acknowledged and has not shipped stay
// on it, and reach the keyspace's other sites only if it is added back
// (docs/operations.md, "Removing a site from a keyspace").
func WithForce() Option {
	return func(o *callOptions) { o.force = true }
}
