package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDerivedMarker(t *testing.T) {
	cfg := testConfig(t)
	cfg.NoSync = false
	cfg.Derived = true
	cfg.BootID = "boot-a"
	db, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	putRecords(t, db, testShard, Record{Key: []byte("k"), Version: ver(1, "a"), Value: []byte("v")})
	if b, err := os.ReadFile(MarkerPath(cfg.Path)); err != nil || string(b) != "boot-a\n" {
		t.Fatalf("marker while open = %q, %v", b, err)
	}
	// Another process of the same boot is refused by the lock, not the marker.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(MarkerPath(cfg.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker after clean close: %v", err)
	}
	// After a clean close any boot may open it, and the data is there.
	cfg.BootID = "boot-b"
	db = openDB(t, cfg)
	var found bool
	if err := db.View(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		_, found, err = s.Latest([]byte("k"), false)
		return err
	}); err != nil || !found {
		t.Fatalf("data after clean close: %v %v", found, err)
	}
}

func TestDerivedUncleanAcrossBoots(t *testing.T) {
	cfg := testConfig(t)
	cfg.Derived = true
	cfg.BootID = "boot-a"
	// Leave a marker behind, as a crash would.
	if err := writeMarker(cfg.Path, "boot-a"); err != nil {
		t.Fatal(err)
	}
	// Same boot: a process crash; the page cache had everything.
	db, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatalf("same boot: %v", err)
	}
	_ = db.Close()

	if err := writeMarker(cfg.Path, "boot-a"); err != nil {
		t.Fatal(err)
	}
	for _, boot := range []string{"boot-b", ""} {
		cfg.BootID = boot
		if _, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrUnclean) {
			t.Fatalf("boot %q: Open = %v, want ErrUnclean", boot, err)
		}
	}
	// A non-derived database ignores markers (a file of its own: the
	// derived one's format is not a non-derived database's).
	cfg.Derived = false
	cfg.Path = filepath.Join(t.TempDir(), "raft.db")
	if err := writeMarker(cfg.Path, "boot-a"); err != nil {
		t.Fatal(err)
	}
	openDB(t, cfg)
}
