package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/causal"
	bolt "go.etcd.io/bbolt"
)

// testID is the identity every test database is created with unless a test
// says otherwise.
var testID = Identity{Site: "site-a", NodeID: "node-1"}

// discardLogger returns a logger that drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testConfig returns a configuration for a fresh database file in a
// temporary directory. NoSync keeps the suite fast; nothing here measures
// durability across power loss.
func testConfig(t testing.TB) Config {
	t.Helper()
	cfg := DefaultConfig(filepath.Join(t.TempDir(), "node.db"), testID)
	cfg.NoSync = true
	cfg.LockTimeout = 100 * time.Millisecond
	return cfg
}

// openDB opens cfg and closes the database when the test ends (unless the
// test closed it already).
func openDB(t testing.TB, cfg Config) *DB {
	t.Helper()
	db, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.Path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newDB opens a fresh database.
func newDB(t testing.TB) *DB {
	t.Helper()
	return openDB(t, testConfig(t))
}

var testShard = ShardID{Keyspace: "ks", Shard: 7}

// ver is shorthand for a version.
func ver(hlc uint64, site string) causal.Version { return causal.Version{HLC: hlc, Site: site} }

// putRecords stores recs in shard id in one Update.
func putRecords(t testing.TB, db *DB, id ShardID, recs ...Record) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := s.Put(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(put): %v", err)
	}
}

// view runs fn on shard id in a read-only transaction.
func view(t testing.TB, db *DB, id ShardID, fn func(s *ShardTx)) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		fn(s)
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
}

// allVersions returns every stored version of shard id, in storage order.
func allVersions(t testing.TB, db *DB, id ShardID) []Record {
	t.Helper()
	var out []Record
	err := db.View(func(tx *Tx) error {
		b := tx.btx.Bucket(id.bucket())
		if b == nil || b.Bucket(bucketData) == nil {
			return nil
		}
		return b.Bucket(bucketData).ForEach(func(k, v []byte) error {
			r, _, err := decodeRecord(k, v, false)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("allVersions: %v", err)
	}
	return out
}

// dumpShard renders the raw contents of the data, state and requests buckets
// of shard id (and any other sub-bucket) as a stable string.
func dumpShard(t testing.TB, db *DB, id ShardID) string {
	t.Helper()
	var buf bytes.Buffer
	err := db.View(func(tx *Tx) error {
		root := tx.btx.Bucket(id.bucket())
		if root == nil {
			buf.WriteString("<no shard>\n")
			return nil
		}
		return root.ForEachBucket(func(name []byte) error {
			fmt.Fprintf(&buf, "[%s]\n", name)
			return root.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&buf, "  %x = %x\n", k, v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatalf("dumpShard: %v", err)
	}
	return buf.String()
}

// recordsEqual compares records field by field (nil and empty values are
// equal).
func recordsEqual(a, b Record) bool {
	return bytes.Equal(a.Key, b.Key) && a.Version == b.Version &&
		bytes.Equal(a.Value, b.Value) && a.Tombstone == b.Tombstone
}

func fmtRecord(r Record) string {
	return fmt.Sprintf("{%q %d@%s %q tomb=%v}", r.Key, r.Version.HLC, r.Version.Site, r.Value, r.Tombstone)
}

func fmtRecords(rs []Record) string {
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, r := range rs {
		if i > 0 {
			buf.WriteString(" ")
		}
		buf.WriteString(fmtRecord(r))
	}
	buf.WriteString("]")
	return buf.String()
}

func checkRecords(t testing.TB, what string, got, want []Record) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = recordsEqual(got[i], want[i])
	}
	if !ok {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtRecords(got), fmtRecords(want))
	}
}

// boltBucketNames lists the top-level buckets of db.
func boltBucketNames(t testing.TB, db *DB) []string {
	t.Helper()
	var names []string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, string(name))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
