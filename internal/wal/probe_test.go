package wal

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
)

// TestDirWithoutNewFilesIsRefused: a log directory in which no file can
// be created opened as long as its segments could be opened, and was
// found only when the head segment filled up (the next segment could not
// be created, and the WAL failed for good). Open now tries to create and
// remove a file there first and refuses the directory, naming it. A probe
// file a crash left behind is removed.
func TestDirWithoutNewFilesIsRefused(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/data/wal")
	cfg.FS = mem
	w := open(t, cfg)
	store(t, w.Log("a"), entries("a", 1, 10, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	tog := errorfs.NewToggle(func(op errorfs.Op) bool { return op.Kind == errorfs.OpCreate })
	tog.On()
	cfg.FS = errorfs.Wrap(mem, tog)
	w2, err := Open(cfg, quiet(), prometheus.NewRegistry())
	if err == nil {
		_ = w2.Close()
		t.Fatal("Open accepted a log directory that takes no new file")
	}
	if !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), "/data/wal") {
		t.Fatalf("Open: %v; want the directory named", err)
	}
	tog.Off()

	// A probe file left by a crash does not make the directory foreign.
	f, err := mem.Create("/data/wal/" + probeName)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	w3 := open(t, cfg)
	checkEntries(t, w3.Log("a"), 1, 10, 1)
	if _, err := mem.Stat("/data/wal/" + probeName); err == nil {
		t.Fatal("the probe file is still there")
	}
}
