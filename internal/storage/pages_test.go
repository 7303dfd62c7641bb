package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPageReferencedTwiceIsRefused: a leaf page whose overflow count grew
// by one takes the next page, which its own parent references too, as
// part of itself. Every key still reads back in order and is found by a
// lookup, so the walk of every key passed, and bbolt's read-write open,
// rebuilding its free list, panicked on the second reference after it had
// opened and mapped the file: Open recovered the panic but left the
// damaged file open and mapped for the life of the process (a state.db
// moved aside to state.db.damaged kept its disk space after the operator
// deleted it), while bbolt's checking goroutine went on reading pages of
// the transaction the panic had closed. Open now finds the second
// reference with plain reads first and refuses the file without mapping
// it for writing.
func TestPageReferencedTwiceIsRefused(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	for i := range 500 {
		putRecords(t, db, testShard, Record{Key: fmt.Appendf(nil, "k%04d", i), Value: bytes.Repeat([]byte("v"), 200), Version: ver(uint64(i+1), "a")})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt's page header: id (8 bytes), flags (2; 0x02 is a leaf),
	// count (2), overflow (4).
	const page, leaf = 4096, 0x02
	isLeaf := func(id int) bool {
		p := raw[id*page:]
		return binary.LittleEndian.Uint64(p) == uint64(id) && binary.LittleEndian.Uint16(p[8:]) == leaf &&
			binary.LittleEndian.Uint16(p[10:]) > 0 && binary.LittleEndian.Uint32(p[12:]) == 0
	}
	// Pages the trees reference (the file also holds freed pages).
	f, err := os.Open(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	w := pageWalker{f: f, size: page, seen: make(map[uint64]bool)}
	meta := raw[:page]
	if m1 := raw[page : 2*page]; binary.LittleEndian.Uint64(m1[metaTxidOff:]) > binary.LittleEndian.Uint64(meta[metaTxidOff:]) {
		meta = m1
	}
	w.hwm = binary.LittleEndian.Uint64(meta[metaPgidOff:])
	err = w.walk(binary.LittleEndian.Uint64(meta[metaRootOff:]), 0)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	changed := -1
	for id := 2; (id+2)*page <= len(raw); id++ {
		if w.seen[uint64(id)] && w.seen[uint64(id+1)] && isLeaf(id) && isLeaf(id+1) {
			changed = id
			break
		}
	}
	if changed < 0 {
		t.Fatal("no two leaf pages in a row")
	}
	binary.LittleEndian.PutUint32(raw[changed*page+12:], 1)
	if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(cfg, discardLogger(), nil)
	if err == nil {
		_ = db2.Close()
		t.Fatal("Open accepted a database whose page is referenced twice")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), cfg.Path) {
		t.Fatalf("err = %v, want ErrCorrupt naming the file", err)
	}
	// Nothing of the refused file stays open or mapped.
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if strings.Contains(string(maps), cfg.Path) {
		t.Errorf("the refused file is still mapped: %s", cfg.Path)
	}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == cfg.Path {
			t.Errorf("the refused file is still open (%s)", fd)
		}
	}
}
