package placement

import "hash/fnv"

// DefaultShards is the number of shards of a keyspace unless configured.
const DefaultShards = 16

// ShardOf returns the shard of key in a keyspace of n shards: FNV-1a (64
// bit) of the key modulo n. The function is part of the on-disk format: it
// must never change for existing keyspaces.
func ShardOf(key []byte, n uint32) uint32 {
	h := fnv.New64a()
	_, _ = h.Write(key)
	return uint32(h.Sum64() % uint64(n))
}
