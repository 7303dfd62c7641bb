package router

import (
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
)

// Call is the per-request state: the keyspace, the session the request
// carried (only the floors this request needs, for a narrowed token), and
// what this request observed, which the reply returns for the client to
// merge.
type Call struct {
	Keyspace string
	Session  *causal.Session
	Observed causal.Session
}

// Observe records that the request saw version v of key (in shard sh).
// A version the request's session already held as key's floor (its own
// write, or one it read before) does not raise PastHLC
// (causal.Session.HoldsKeyVersion).
func (c *Call) Observe(sh placement.Shard, key []byte, v causal.Version) {
	if c.Session.HoldsKeyVersion(c.Keyspace, key, v) {
		c.Session.ObserveKnown(c.Keyspace, key, sh.ID, v)
		c.Observed.ObserveKnown(c.Keyspace, key, sh.ID, v)
		return
	}
	c.Session.ObserveShard(c.Keyspace, key, sh.ID, v)
	c.Observed.ObserveShard(c.Keyspace, key, sh.ID, v)
}

// ObserveWrite records that the request wrote version v of key (in shard
// sh): the session's dependencies become that write (see
// causal.Session.ObserveWrite).
func (c *Call) ObserveWrite(sh placement.Shard, key []byte, v causal.Version) {
	c.Session.ObserveWrite(c.Keyspace, key, sh.ID, v)
	c.Observed.ObserveWrite(c.Keyspace, key, sh.ID, v)
}

// ObserveStamp records that the request read a version of another site
// that this site applied at stamp (storage.Record.Stamp; 0: none). The
// session's PastHLC rises to it: a replica of any shard of this site that
// reached it has applied the version's dependencies too, which are in the
// session's causal past now (docs/adr/019).
func (c *Call) ObserveStamp(stamp uint64) {
	if stamp == 0 {
		return
	}
	c.Session.ObserveHLC(stamp)
	c.Observed.ObserveHLC(stamp)
}

// Merge folds what a forwarded request observed into c.
func (c *Call) Merge(o *causal.Session) {
	c.Session.Merge(o)
	c.Observed.Merge(o)
}

// Token returns the session token of the reply. For a request that carried
// a partial session (the floors it needed, as the Go client sends), it
// carries only what this request observed: the versions it read or wrote,
// with their shards, and their largest HLC. Otherwise it carries the whole
// session updated with them.
func (c *Call) Token() []byte {
	if c.Session.Partial {
		// The client derives the dependencies from the floors it merges
		// (causal.Session.Merge): the delta need not carry them.
		c.Observed.ClearDeps()
		return c.Observed.Encode()
	}
	return c.Session.Encode()
}
