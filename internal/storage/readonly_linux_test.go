package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadOnlyFileSystemIsNotDamage: a database on a file system mounted
// read-only reads back intact but cannot be opened for writing. Open says
// so, and does not report the file as corrupt (kvd would then send the
// operator to the procedure for a damaged data directory, which gives up
// the node's data). It needs a read-only bind mount, so it runs as root
// only.
func TestReadOnlyFileSystemIsNotDamage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a read-only bind mount needs root")
	}
	cfg := testConfig(t)
	db := openDB(t, cfg)
	if err := db.RaftStore("g").SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	if err := syscall.Mount(filepath.Dir(cfg.Path), ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(ro, 0); err != nil {
			t.Errorf("unmount %s: %v", ro, err)
		}
	})
	if err := syscall.Mount("", ro, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("remount read-only: %v", err)
	}
	rcfg := cfg
	rcfg.Path = filepath.Join(ro, filepath.Base(cfg.Path))
	db2, err := Open(rcfg, discardLogger(), nil)
	if err == nil {
		_ = db2.Close()
		t.Fatal("Open opened a database on a read-only file system")
	}
	if errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "read-write") {
		t.Fatalf("Open: %v, want EROFS and what to do, not ErrCorrupt", err)
	}
}
