package shard

import "github.com/causeway-db/causeway/internal/storage"

// CorruptForTest damages this node's replica of g's shard through
// storage.CorruptForTest: the newest version of key gets value, past the
// state machine. Only tests may call it (the test-hooks rule of
// internal/lint).
func CorruptForTest(g *Group, key, value []byte) error {
	return storage.CorruptForTest(g.deps.DB, g.id, key, value)
}
