package storage

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestDamagedFormatRecordIsRefused: a raft database of format 3 whose
// format record reads "1" or "2" (a changed byte) holds sealed values that
// a migration from those formats would seal a second time. Open refuses
// it with ErrCorrupt, naming the file, and leaves it as it was, instead of
// rewriting every stable value and the site incarnation.
func TestDamagedFormatRecordIsRefused(t *testing.T) {
	for _, format := range []string{"1", "2"} {
		t.Run("format"+format, func(t *testing.T) {
			cfg := testConfig(t)
			db := openDB(t, cfg)
			if err := db.RaftStore("g").SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := db.RaftStore("g").Set([]byte("LastVoteCand"), []byte("127.0.0.1:7381")); err != nil {
				t.Fatal(err)
			}
			if err := db.SetSiteIncarnation(0xfeed); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := bolt.Open(cfg.Path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(metaFormat, []byte(format))
			}); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(cfg.Path)
			if err != nil {
				t.Fatal(err)
			}
			db2, err := Open(cfg, discardLogger(), nil)
			if err == nil {
				term, terr := db2.RaftStore("g").GetUint64([]byte("CurrentTerm"))
				_ = db2.Close()
				t.Fatalf("Open accepted a format-3 file whose format record says %q; the term reads %d, %v", format, term, terr)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), cfg.Path) {
				t.Fatalf("Open: %v, want ErrCorrupt naming %s", err, cfg.Path)
			}
			after, err := os.ReadFile(cfg.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("Open changed the file it refused")
			}
		})
	}
}

// TestForeignDatabaseErrorNamesTheFile: a database created by another node
// is refused with an error that names the file, so that an operator can
// tell which of the node's files disagrees with its flags.
func TestForeignDatabaseErrorNamesTheFile(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Identity = Identity{Site: testID.Site, NodeID: "node-2"}
	db2, err := Open(other, discardLogger(), nil)
	if err == nil {
		_ = db2.Close()
		t.Fatal("Open accepted a database of another node")
	}
	if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), cfg.Path) {
		t.Fatalf("Open: %v, want ErrForeign naming %s", err, cfg.Path)
	}
}
