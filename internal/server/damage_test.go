package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/wal"
)

// TestDamagedLogIsRefused: a node whose write-ahead log was damaged in
// the middle (bytes flipped early in the segment, valid records after
// them) refuses to start, with an error naming the segment file and the
// offset and pointing at the recovery procedure, instead of cutting the
// log there and serving a subset of its acknowledged writes. With a new
// boot id the state database would be rebuilt from that log, as after a
// machine restart.
func TestDamagedLogIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := 0; i < 300; i++ {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	n.srv.Stop()

	segs, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{100, 2_000, 10_000} {
		t.Run(fmt.Sprint("offset ", at), func(t *testing.T) {
			crash := t.TempDir()
			copyDir(t, dir, crash)
			b := append([]byte(nil), raw...)
			for k := range 4 {
				b[at+k] ^= 0x5A
			}
			seg := filepath.Join(crash, walDir, filepath.Base(segs[0]))
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rebooted := testConfig(crash)
			rebooted.Shards, rebooted.BootID = 2, "boot-2"
			srv, err := New(rebooted, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			err = srv.Start()
			if err == nil {
				srv.Stop()
				t.Fatal("the node started on a damaged log")
			}
			msg := err.Error()
			if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(msg, seg) || !strings.Contains(msg, "at offset ") ||
				!strings.Contains(msg, "docs/operations.md") {
				t.Fatalf("start on a damaged log: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
	// The undamaged directory still starts, with every key.
	cfg.BootID = "boot-2"
	n2 := start(t, cfg)
	for i := 0; i < 300; i++ {
		if g := n2.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("k%03d: %v", i, g)
		}
	}
}

// TestDamagedStateIsRebuilt: a node whose state database was damaged
// while it was stopped (page headers overwritten past the meta pages: a
// disk fault) starts, with the damaged file moved aside to
// state.db.damaged, shard state rebuilt from the raft snapshots and
// logs, and every acknowledged write readable. bbolt alone panics on such
// a file (TestOpenDamagedPages, internal/storage).
func TestDamagedStateIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := 0; i < 300; i++ {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	n.srv.Stop()

	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	for p := 2; p < min(len(b)/page, 4096); p++ {
		for i := range 16 {
			b[p*page+i] = 0xA5
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n2 := start(t, cfg) // same boot: a process restart
	for i := 0; i < 300; i++ {
		if g := n2.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("k%03d after the rebuild: %v", i, g)
		}
	}
	if _, err := os.Stat(path + damagedSuffix); err != nil {
		t.Fatalf("the damaged state database was not kept aside: %v", err)
	}
}
