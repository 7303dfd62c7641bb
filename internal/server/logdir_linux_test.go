package server

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImmutableLogDirIsRefused: a write-ahead log directory that takes no
// new file (here made immutable, which holds for root too) let the node
// start, since every segment it already had opened for writing; it was
// found only when the head segment filled up and the next one could not
// be created, and the node stopped then. The start now refuses it, naming
// the directory and what to check.
func TestImmutableLogDirIsRefused(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 1
	n := start(t, cfg)
	n.put(t, "k", "v")
	n.srv.Stop()
	walDir := filepath.Join(dir, "wal")
	if out, err := exec.Command("chattr", "+i", walDir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", walDir).Run() })
	// The directory refuses a new file even to this process.
	if f, err := os.Create(filepath.Join(walDir, "x")); err == nil {
		_ = f.Close()
		t.Skip("the immutable directory takes new files")
	}
	srv, err := New(cfg, slog.New(&warnings{}))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("started on a log directory that takes no new file")
	}
	if msg := err.Error(); !errors.Is(err, fs.ErrPermission) || !strings.Contains(msg, walDir) ||
		!strings.Contains(msg, "kvd cannot use a file or directory of its data directory") {
		t.Fatalf("start: %v; want the log directory named and what to check", err)
	}
	if _, err := os.Stat(filepath.Join(walDir, "probe.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("probe file left behind: %v", err)
	}
	// Once the directory takes files again, the node starts on its data.
	if out, err := exec.Command("chattr", "-i", walDir).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	n2 := start(t, cfg)
	defer n2.srv.Stop()
	if got := n2.getStrong(t, "k"); string(got.GetValue()) != "v" {
		t.Fatalf("k = %q after the restart, want v", got.GetValue())
	}
}
