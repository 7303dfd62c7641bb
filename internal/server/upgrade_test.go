package server

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// untar extracts a gzipped tar archive into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUpgradeMovesRaftLogsToWAL starts on a data directory written by the
// previous on-disk layout, whose raft logs are in raft.db (testdata: a
// single node, 4 shards, k000..k199 = v0..v199 written, no snapshot taken,
// cleanly stopped; its state.db left out). The logs must move into the
// write-ahead log, and the shard state is rebuilt from them alone.
func TestUpgradeMovesRaftLogsToWAL(t *testing.T) {
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "v1-data-dir.tar.gz"), dir)
	if _, err := os.Stat(filepath.Join(dir, walDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old data directory has a %s: %v", walDir, err)
	}
	cfg := testConfig(dir)
	cfg.Shards = 4
	check := func(n *node) {
		t.Helper()
		for i := 0; i < 200; i++ {
			k := fmt.Sprintf("k%03d", i)
			if g := n.getStrong(t, k); !g.Found || string(g.Value) != fmt.Sprint("v", i) {
				t.Fatalf("%s after the upgrade: %v", k, g)
			}
		}
	}
	n := start(t, cfg)
	check(n)
	n.put(t, "after", "upgrade")
	n.srv.Stop()
	if _, err := os.Stat(filepath.Join(dir, walDir)); err != nil {
		t.Fatalf("no write-ahead log after the upgrade: %v", err)
	}

	// Restarted, and once more with the state rebuilt from the WAL alone.
	for _, rebuild := range []bool{false, true} {
		if rebuild {
			if err := os.Remove(filepath.Join(dir, stateFile)); err != nil {
				t.Fatal(err)
			}
		}
		n = start(t, cfg)
		check(n)
		if g := n.getStrong(t, "after"); !g.Found || string(g.Value) != "upgrade" {
			t.Fatalf("write after the upgrade (rebuild %v): %v", rebuild, g)
		}
		n.srv.Stop()
	}

	// The logs are gone from raft.db: without the WAL the node refuses to
	// start rather than run with empty logs.
	if err := os.RemoveAll(filepath.Join(dir, walDir)); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err == nil {
		srv.Stop()
		t.Fatal("started without its write-ahead log")
	} else {
		t.Logf("without the WAL: %v", err)
	}
}
