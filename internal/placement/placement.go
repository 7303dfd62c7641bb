package placement

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

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

// maxQuotedKeyspace bounds the part of a keyspace name that errors repeat:
// a valid name has at most 63 bytes, and a request may name one of any
// length.
const maxQuotedKeyspace = 64

// QuoteKeyspace returns keyspace name quoted for an error message; a name
// longer than any valid one is cut, and the text says how long it was.
func QuoteKeyspace(name string) string {
	if len(name) <= maxQuotedKeyspace {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%s... (a name of %d bytes)", strconv.Quote(name[:maxQuotedKeyspace]), len(name))
}
