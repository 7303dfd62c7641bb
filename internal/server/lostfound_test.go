package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDataDirMayBeAFileSystemRoot: a file system given to kvd alone and
// mounted as its data directory holds lost+found at its root (mkfs.ext4
// creates it). The node starts on it, takes writes, and starts again on
// its data; a file it does not know is still refused.
func TestDataDirMayBeAFileSystemRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, lostFound), 0o700); err != nil {
		t.Fatal(err)
	}
	n := start(t, testConfig(dir))
	n.put(t, "k", "v")
	n.srv.Stop()

	n2 := start(t, testConfig(dir))
	if g := n2.get(t, "k"); string(g.Value) != "v" {
		t.Fatalf("k after restart = %v", g)
	}
	n2.srv.Stop()

	// A file named lost+found is not fsck's directory.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, lostFound), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(testConfig(dir2), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); !errors.Is(err, ErrForeignDataDir) {
		srv.Stop()
		t.Fatalf("start beside a file named %s: %v, want ErrForeignDataDir", lostFound, err)
	}
}
