package storage

import (
	"bytes"
	"fmt"

	"github.com/causeway-db/causeway/internal/causal"
)

// CorruptForTest damages one shard replica the way a bad disk or a bug
// would: it overwrites the value of the newest version of key in shard id
// of db with value (or stores a new version of key when it has none),
// straight into the database, past the state machine and without touching
// the applied index. The replica then silently differs from the rest of
// its group, which is what the replica consistency check must detect.
//
// Only tests may call it: the test-hooks rule of internal/lint rejects a
// reference to any ...ForTest function from a non-test file, so no code
// path of a normal build reaches it and the linker leaves it out of the
// binaries (cmd/kvd's TestNoTestHooksInBinary checks).
func CorruptForTest(db *DB, id ShardID, key, value []byte) error {
	return db.UpdateAlone(func(tx *Tx) error {
		root := tx.btx.Bucket(id.bucket())
		if root == nil {
			return fmt.Errorf("storage: shard %s is not stored here", id)
		}
		data := root.Bucket(bucketData)
		prefix := keyPrefix(key)
		k, _ := data.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return data.Put(encodeVersionKey(key, causal.Version{HLC: 1, Site: "corrupt"}), encodeValue(value, false, 0))
		}
		return data.Put(bytes.Clone(k), encodeValue(value, false, 0))
	})
}

// FailForTest fails db the way a failed commit of its open transaction
// would (deferred commits only): the applies since the last commit are
// rolled back, Failed is closed and every later call returns ErrFailed.
// Only tests may call it (see CorruptForTest).
func FailForTest(db *DB, err error) error {
	if db.def == nil {
		return fmt.Errorf("storage: FailForTest needs a database with deferred commits")
	}
	db.def.mu.Lock()
	defer db.def.mu.Unlock()
	return db.failLocked(err)
}
