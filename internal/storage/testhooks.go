package storage

import (
	"bytes"
	"fmt"

	"github.com/causeway-db/causeway/internal/causal"
	bolt "go.etcd.io/bbolt"
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
		data, err := testData(tx, id)
		if err != nil {
			return err
		}
		prefix := keyPrefix(key)
		k, _ := data.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			ek := encodeVersionKey(key, causal.Version{HLC: 1, Site: "corrupt"})
			return data.Put(ek, encodeValue(ek, value, false, 0))
		}
		return data.Put(bytes.Clone(k), encodeValue(k, value, false, 0))
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

// DamageValueForTest changes one byte of the value of key's newest version
// in shard id of db, keeping the version's checksum, the way a disk that
// changed a written page would. Only tests may call it (see
// CorruptForTest).
func DamageValueForTest(db *DB, id ShardID, key []byte) error {
	return db.UpdateAlone(func(tx *Tx) error {
		data, err := testData(tx, id)
		if err != nil {
			return err
		}
		prefix := keyPrefix(key)
		k, v := data.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) || len(v) < 2+sumLen {
			return fmt.Errorf("storage: %q has no stored value to damage", key)
		}
		bad := bytes.Clone(v)
		bad[len(bad)-sumLen-1] ^= 0x01
		return data.Put(bytes.Clone(k), bad)
	})
}

// testData returns shard id's data bucket in tx.
func testData(tx *Tx, id ShardID) (*bolt.Bucket, error) {
	root := tx.btx.Bucket(id.bucket())
	if root == nil {
		return nil, fmt.Errorf("storage: shard %s is not stored here", id)
	}
	return root.Bucket(bucketData), nil
}

// FailWritesForTest makes every later commit of db's group committer
// (raft.db: raft's terms and votes) fail with err after its updates ran,
// as a full or failing disk fails the write of the file: the commit is
// rolled back, every update in it gets err, and WriteFailed is closed.
// Only tests may call it (see CorruptForTest).
func FailWritesForTest(db *DB, err error) {
	db.writeFault.Store(&err)
}
