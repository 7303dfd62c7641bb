package shard

import (
	"math"
	"sync"

	"github.com/hashicorp/raft"
)

// Bounds of a replica's cache of its newest raft log entries.
const (
	// logCacheEntries is the most entries the cache holds.
	logCacheEntries = 1024
	// DefaultLogCacheBytes is the most entry bytes (data and extensions)
	// the cache of one replica holds.
	DefaultLogCacheBytes = 4 << 20
)

// logCache keeps a replica's newest raft log entries in memory, so that
// raft's replication and its applies read them without a read of the
// write-ahead log. It holds at most logCacheEntries entries and at most
// maxBytes of their data: raft's own LogCache holds a fixed number of
// entries whatever their size, and with large values (1,024 entries of
// up to 1 MiB per replica) a node's heap grew by gigabytes
// (TestLogCacheIsBoundedInBytes). An entry not in the cache is read
// from the store.
type logCache struct {
	store    raft.LogStore
	maxBytes int

	mu    sync.RWMutex
	first uint64      // index of ents[0]; REQUIRES: mu
	ents  []*raft.Log // consecutive indexes; REQUIRES: mu
	bytes int         // data and extensions of ents; REQUIRES: mu
}

func newLogCache(store raft.LogStore, maxBytes int) *logCache {
	return &logCache{store: store, maxBytes: maxBytes}
}

func entryBytes(l *raft.Log) int { return len(l.Data) + len(l.Extensions) }

// GetLog implements raft.LogStore.
func (c *logCache) GetLog(index uint64, out *raft.Log) error {
	c.mu.RLock()
	if n := uint64(len(c.ents)); n > 0 && index >= c.first && index < c.first+n {
		*out = *c.ents[index-c.first]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(index, out)
}

// StoreLog implements raft.LogStore.
func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries are cached once the
// store holds them.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	if len(logs) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Only the newest entries that fit are kept: skip those that would be
	// evicted at once.
	start, size := len(logs), 0
	for start > 0 && len(logs)-start < logCacheEntries {
		n := entryBytes(logs[start-1])
		if size+n > c.maxBytes {
			break
		}
		size += n
		start--
	}
	logs = logs[start:]
	if len(logs) == 0 {
		// The newest entry alone exceeds the budget; what is cached
		// before it is still consecutive, but no longer the newest.
		c.reset()
		return nil
	}
	first := logs[0].Index
	if n := uint64(len(c.ents)); n == 0 || first < c.first || first > c.first+n {
		// Not a continuation (a gap, or entries replacing all of the
		// cached ones): start over.
		c.reset()
		c.first = first
	} else if first < c.first+n {
		// Entries replace a suffix of the cached ones.
		for _, l := range c.ents[first-c.first:] {
			c.bytes -= entryBytes(l)
		}
		clear(c.ents[first-c.first:])
		c.ents = c.ents[:first-c.first]
	}
	for k, l := range logs {
		if k > 0 && l.Index != logs[k-1].Index+1 {
			c.reset()
			return nil
		}
		c.ents = append(c.ents, l)
		c.bytes += entryBytes(l)
	}
	for len(c.ents) > 0 && (len(c.ents) > logCacheEntries || c.bytes > c.maxBytes) {
		c.bytes -= entryBytes(c.ents[0])
		c.ents[0] = nil // released now (append copies only the rest)
		c.ents = c.ents[1:]
		c.first++
	}
	return nil
}

// reset empties the cache. REQUIRES: c.mu held.
func (c *logCache) reset() {
	c.ents, c.bytes, c.first = nil, 0, 0
}

// cached returns how many entries, and how many bytes of their data, the
// cache holds.
func (c *logCache) cached() (entries, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.ents), c.bytes
}

// FirstIndex implements raft.LogStore.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex implements raft.LogStore.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange implements raft.LogStore. The cache is emptied if it holds
// an entry in the range (raft's LogCache empties it on every deletion).
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	if n := uint64(len(c.ents)); n > 0 && min < c.first+n && max >= c.first {
		c.reset()
	}
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

// IsMonotonic implements raft.MonotonicLogStore as the store does.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// BytesAfter implements raft.LogSizer as the store does.
func (c *logCache) BytesAfter(index uint64) uint64 {
	if s, ok := c.store.(raft.LogSizer); ok {
		return s.BytesAfter(index)
	}
	return 0
}

// NewestWithin implements raft.LogSizer as the store does.
func (c *logCache) NewestWithin(maxBytes uint64) uint64 {
	if s, ok := c.store.(raft.LogSizer); ok {
		return s.NewestWithin(maxBytes)
	}
	return math.MaxUint64
}
