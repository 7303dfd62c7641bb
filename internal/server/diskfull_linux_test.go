package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// smallFileSystem mounts a tmpfs of size bytes and returns its root. It
// needs root, so the tests that use it skip otherwise.
func smallFileSystem(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillFileSystem writes path until the file system that holds it has no
// space left.
func fillFileSystem(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", path, err)
				}
				break
			}
		}
	}
}

// startErr starts a server on cfg, which must fail, and returns its error.
func startErr(t *testing.T, cfg Config) error {
	t.Helper()
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("the node started on a full disk")
	}
	return err
}

// TestFullDiskStartSaysWhatToDo: a start on a full file system fails (its
// first write, the state database's open marker, finds no space) with an
// error that says the data directory's file system is full and to free
// space. When the data directory keeps a damaged state database an
// earlier start moved aside (state.db.damaged), which holds its space
// until an operator deletes it, the error names it and says to delete or
// move it once it is not needed. Freeing the space, the node starts on its
// data.
func TestFullDiskStartSaysWhatToDo(t *testing.T) {
	root := smallFileSystem(t, 96<<20) // the write-ahead log preallocates 64 MiB
	dir := filepath.Join(root, "data")
	filler := filepath.Join(root, "filler")
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := range 100 {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	n.srv.Stop()

	fillFileSystem(t, filler)
	err := startErr(t, cfg)
	t.Logf("start on a full disk: %v", err)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("start on a full disk: %v, want ENOSPC", err)
	}
	for _, want := range []string{"the file system of the data directory " + dir + " is full", "free space on it, then start kvd again", `"Disk space"`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("start on a full disk: %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), damagedSuffix) {
		t.Fatalf("start on a full disk: %v names a damaged copy, and there is none", err)
	}

	// Damage the state database: the next start moves it aside to
	// state.db.damaged and rebuilds it.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, stateFile)
	damagePages(t, path)
	n2 := start(t, cfg)
	n2.srv.Stop()
	if _, err := os.Stat(path + damagedSuffix); err != nil {
		t.Fatalf("the damaged state database was not kept aside: %v", err)
	}

	fillFileSystem(t, filler)
	err = startErr(t, cfg)
	t.Logf("start on a full disk with a damaged copy: %v", err)
	for _, want := range []string{"free space on it", path + damagedSuffix + " (", "delete it, or move it off this file system, once it is no longer needed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("start on a full disk with a damaged copy: %v, want it to say %q", err, want)
		}
	}

	// Deleting the damaged copy frees enough.
	if err := os.Remove(path + damagedSuffix); err != nil {
		t.Fatal(err)
	}
	n3 := start(t, cfg)
	for i := range 100 {
		if g := n3.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("k%03d after freeing space: %v", i, g)
		}
	}
}

// TestFullDiskStopSaysWhatToDo: a running node whose file system fills up
// stops (its next write of the state database or of its log fails), and
// the error Run returns says that the file system is full and to free
// space.
func TestFullDiskStopSaysWhatToDo(t *testing.T) {
	root := smallFileSystem(t, 96<<20)
	dir := filepath.Join(root, "data")
	cfg := testConfig(dir)
	cfg.Shards = 2
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()
	fillFileSystem(t, filepath.Join(root, "filler"))

	value := make([]byte, 64<<10)
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for i := 0; err == nil; i++ {
		select {
		case err = <-ran:
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not stop on a full disk")
		}
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = n.kv.Put(c, &kvv1.PutRequest{Key: fmt.Appendf(nil, "k%05d", i), Value: value})
		cancel()
	}
	t.Logf("Run on a full disk: %v", err)
	for _, want := range []string{"the file system of the data directory " + dir + " is full", "free space on it, then start kvd again"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run on a full disk: %v, want it to say %q", err, want)
		}
	}
}

// TestTooSmallFileSystemSaysWhy: a first start on a file system with
// free space, but less than a write-ahead log segment, fails saying that
// it has less than the segment needs, not only that it is full (which
// its free space seems to contradict), and a start on more space then
// works on the same directory.
func TestTooSmallFileSystemSaysWhy(t *testing.T) {
	root := smallFileSystem(t, 48<<20)
	dir := filepath.Join(root, "data")
	cfg := testConfig(dir)
	cfg.Shards = 1
	err := startErr(t, cfg)
	t.Logf("start on a small file system: %v", err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "less than the 64.0 MiB the write-ahead log allocates for each segment") {
		t.Fatalf("start on a small file system: %v, want ENOSPC saying a segment needs more", err)
	}
	if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_REMOUNT, "size=128m"); err != nil {
		t.Fatalf("remount: %v", err)
	}
	n := start(t, cfg)
	n.put(t, "k", "v")
	n.srv.Stop()
}
