package snapstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var testConf = raft.Configuration{Servers: []raft.Server{
	{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7381"},
	{Suffrage: raft.Nonvoter, ID: "n2", Address: "127.0.0.1:7391"},
}}

// clock names snapshots with increasing milliseconds.
func clock() func() time.Time {
	t := time.UnixMilli(1_700_000_000_000)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func open(t *testing.T, fs vfs.FS, dir string) *Store {
	t.Helper()
	s, err := New(Config{Dir: dir, Retain: 2, FS: fs, Now: clock()}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func state(index uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("state at %d;", index)), 3000)
}

// write stores a snapshot of index (term 3) whose state is state(index).
func write(t *testing.T, s raft.SnapshotStore, index uint64) string {
	t.Helper()
	_, trans := raft.NewInmemTransport("127.0.0.1:7381")
	k, err := s.Create(1, index, 3, testConf, 2, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Write(state(index)); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	return k.ID()
}

// check requires s to list exactly the snapshots of indexes, newest first,
// each readable with its state.
func check(t *testing.T, s raft.SnapshotStore, indexes ...uint64) {
	t.Helper()
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, m := range list {
		got = append(got, m.Index)
	}
	if fmt.Sprint(got) != fmt.Sprint(indexes) {
		t.Fatalf("List: indexes %v, want %v", got, indexes)
	}
	for _, m := range list {
		om, rc, err := s.Open(m.ID)
		if err != nil {
			t.Fatalf("Open(%s): %v", m.ID, err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || !bytes.Equal(b, state(m.Index)) {
			t.Fatalf("Open(%s): %d bytes, %v", m.ID, len(b), err)
		}
		if om.Index != m.Index || om.Term != 3 || om.Size != int64(len(b)) || om.ConfigurationIndex != 2 ||
			!reflect.DeepEqual(om.Configuration, testConf) || om.Version != 1 {
			t.Fatalf("Open(%s) meta: %+v", m.ID, om)
		}
	}
}

// TestReadsFileSnapshotStore: snapshots written by hashicorp/raft's
// FileSnapshotStore (every existing data directory) are listed and opened,
// and the other way round (an older binary reads ours).
func TestReadsFileSnapshotStore(t *testing.T) {
	dir := t.TempDir()
	theirs, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	write(t, theirs, 10)
	write(t, theirs, 20)
	ours := open(t, nil, dir)
	check(t, ours, 20, 10)

	write(t, ours, 30)
	check(t, ours, 30, 20)
	check(t, theirs, 30, 20)
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("snapshot directories after retaining 2: %v, %v", entries, err)
	}
	for _, name := range []string{metaFile, stateFile} {
		if _, err := os.Stat(filepath.Join(dir, "snapshots", entries[1].Name(), name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetainAndCancel(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs, "/d")
	for i := uint64(1); i <= 5; i++ {
		write(t, s, i*100)
	}
	check(t, s, 500, 400)
	k, err := s.Create(1, 600, 3, testConf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = k.Write([]byte("partial"))
	check(t, s, 500, 400) // in progress: not listed
	if err := k.Cancel(); err != nil {
		t.Fatal(err)
	}
	entries, _ := fs.ReadDir("/d/snapshots")
	if len(entries) != 2 {
		t.Fatalf("after Cancel: %v", entries)
	}
	if _, err := s.Create(2, 1, 1, testConf, 1, nil); err == nil {
		t.Fatal("Create accepted snapshot version 2")
	}
	for _, id := range []string{"", "../x", "a/b", "1-2-3.tmp", "nothing"} {
		if _, _, err := s.Open(id); err == nil {
			t.Fatalf("Open(%q) succeeded", id)
		}
	}
}

// TestCorruptStateRefused: a state that does not match meta.json's size or
// CRC is refused by Open (it stays listed: raft tries the next one), with
// an error that names the file.
func TestCorruptStateRefused(t *testing.T) {
	for _, damage := range []struct {
		name string
		fn   func(b []byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := open(t, fs, "/d")
			id := write(t, s, 7)
			p := filepath.Join("/d/snapshots", id, stateFile)
			f, _ := fs.Open(p)
			b, _ := io.ReadAll(f)
			_ = f.Close()
			b = damage.fn(b)
			g, _ := fs.Create(p)
			_, _ = g.Write(b)
			_ = g.Close()
			if _, _, err := s.Open(id); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Open of a damaged state: %v, want ErrCorrupt naming %s", err, p)
			}
		})
	}
}

// TestCrashImages: a snapshot is in a crash image once Close returned, and
// not before; an interrupted one leaves a temporary directory that the
// next New removes.
func TestCrashImages(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs, "/data/snaps/default/1")
	write(t, s, 10)
	k, err := s.Create(1, 20, 3, testConf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = k.Write(state(20))
	img := fs.CrashClone()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	check(t, open(t, img, "/data/snaps/default/1"), 10)
	check(t, open(t, fs.CrashClone(), "/data/snaps/default/1"), 20, 10)

	// A temporary directory that did reach the disk is cleaned up.
	if err := vfs.MkdirAllSync(img, "/data/snaps/default/1/snapshots/3-30-1.tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	open(t, img, "/data/snaps/default/1")
	if _, err := img.Stat("/data/snaps/default/1/snapshots/3-30-1.tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory after New: %v", err)
	}
}

// TestNoSyncLosesSnapshots: the crash model notices a store that does not
// sync: with NoSync nothing it wrote is in an image.
func TestNoSyncLosesSnapshots(t *testing.T) {
	fs := vfs.NewMem()
	s, err := New(Config{Dir: "/d", Retain: 2, FS: fs, NoSync: true}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, 10)
	check(t, s, 10)
	img := fs.CrashClone()
	if _, err := img.Stat("/d"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the image of an unsynced store: %v", err)
	}
}

// TestFailedSyncFailsClose: when a sync fails, Close fails and the
// snapshot is not listed (raft then keeps its log).
func TestFailedSyncFailsClose(t *testing.T) {
	for n := int64(0); n < 4; n++ { // state, meta.json, temporary directory, snapshots directory
		t.Run(fmt.Sprint("sync ", n), func(t *testing.T) {
			mem := vfs.NewMem()
			s := open(t, mem, "/d")
			write(t, s, 10)
			s.fs = errorfs.Wrap(mem, errorfs.OnIndex(n, errorfs.Syncs))
			k, err := s.Create(1, 20, 3, testConf, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = k.Write(state(20))
			if err := k.Close(); !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("Close: %v", err)
			}
			check(t, s, 10)
			entries, _ := mem.ReadDir("/d/snapshots")
			if len(entries) != 1 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

func TestCheckLog(t *testing.T) {
	cases := []struct {
		snap        uint64 // 0: none
		first, last uint64
		gap         bool
	}{
		{0, 0, 0, false},
		{0, 1, 10, false},
		{0, 2, 10, true},
		{100, 0, 0, false},
		{100, 90, 120, false},
		{100, 101, 120, false},
		{100, 102, 120, true},
		{100, 50, 80, false}, // older entries only: nothing after the snapshot to apply
		{100, 150, 150, true},
	}
	for _, c := range cases {
		fs := vfs.NewMem()
		s := open(t, fs, "/d")
		if c.snap > 0 {
			write(t, s, c.snap)
		}
		logs := raft.NewInmemStore()
		for i := c.first; i <= c.last && c.last > 0; i++ {
			if err := logs.StoreLog(&raft.Log{Index: i, Term: 1}); err != nil {
				t.Fatal(err)
			}
		}
		err := CheckLog(s, logs)
		if c.gap != errors.Is(err, ErrLogGap) || (!c.gap && err != nil) {
			t.Fatalf("snapshot %d, log [%d, %d]: %v", c.snap, c.first, c.last, err)
		}
	}
}

// TestChangedMetaIsRefused: meta.json's CRC covers the state only, so a
// changed digit in its index or term still decodes. A node rebuilding its
// state from such a snapshot took it for a later one and skipped the
// entries in between (acknowledged writes lost without a word). The
// directory name repeats the term and index: a meta.json that contradicts
// it is corrupt (Open), and List skips it like an unreadable one.
func TestChangedMetaIsRefused(t *testing.T) {
	for _, change := range []struct{ name, from, to string }{
		{"index raised", `"Index":8`, `"Index":9`},
		{"index lowered", `"Index":8`, `"Index":6`},
		{"term changed", `"Term":3`, `"Term":4`},
		{"id changed", `"ID":"3-8-`, `"ID":"3-9-`},
	} {
		t.Run(change.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, nil, dir)
			write(t, s, 7)
			id := write(t, s, 8)
			p := filepath.Join(dir, snapDir, id, metaFile)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			changed := bytes.Replace(b, []byte(change.from), []byte(change.to), 1)
			if bytes.Equal(changed, b) {
				t.Fatalf("%s not in %s", change.from, b)
			}
			if err := os.WriteFile(p, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Open(id); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open of a snapshot whose meta.json changed: %v", err)
			}
			check(t, s, 7)
		})
	}
}

// TestFilesAreOwnerOnly: a snapshot's files are readable by kvd's user
// only, as the rest of the data directory (they hold the shard's data).
func TestFilesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	s := open(t, vfs.Default, dir)
	id := write(t, s, 10)
	for _, f := range []string{stateFile, metaFile} {
		fi, err := os.Stat(filepath.Join(s.dir, id, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

// TestMissingStateIsCorrupt: a snapshot that meta.json lists but whose
// state.bin is gone, or is a directory, is damage (ErrCorrupt, naming the
// file), not an error to retry: the group that needs it would retry for
// good.
func TestMissingStateIsCorrupt(t *testing.T) {
	for _, damage := range []struct {
		name string
		fn   func(fs vfs.FS, p string) error
	}{
		{"deleted", func(fs vfs.FS, p string) error { return fs.Remove(p) }},
		{"a directory", func(fs vfs.FS, p string) error {
			if err := fs.Remove(p); err != nil {
				return err
			}
			return fs.MkdirAll(p, 0o700)
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			fs := vfs.OrDefault(nil)
			dir := t.TempDir()
			s := open(t, fs, dir)
			id := write(t, s, 7)
			p := filepath.Join(dir, "snapshots", id, stateFile)
			if err := damage.fn(fs, p); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Open(id); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Open of a snapshot without its state: %v, want ErrCorrupt naming %s", err, p)
			}
		})
	}
}

// TestFailedWriteLeavesNoSnapshot: a snapshot whose files cannot be
// written (a full disk: its directory, state.bin, meta.json or the rename
// into place fails) fails, is not listed, and leaves nothing behind in
// the snapshots directory; the next snapshot, once the disk takes writes
// again, is written and listed as usual.
func TestFailedWriteLeavesNoSnapshot(t *testing.T) {
	base := func(name string) errorfs.Predicate {
		return func(op errorfs.Op) bool { return filepath.Base(op.Path) == name }
	}
	kind := func(k errorfs.OpKind, p errorfs.Predicate) errorfs.Predicate {
		return func(op errorfs.Op) bool { return op.Kind == k && (p == nil || p(op)) }
	}
	for _, c := range []struct {
		name string
		pred errorfs.Predicate
	}{
		{"directory", kind(errorfs.OpMkdir, nil)},
		{"state create", kind(errorfs.OpCreate, base(stateFile))},
		{"state write", kind(errorfs.OpWrite, base(stateFile))},
		{"meta create", kind(errorfs.OpCreate, base(metaFile))},
		{"meta write", kind(errorfs.OpWrite, base(metaFile))},
		{"rename", kind(errorfs.OpRename, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			s := open(t, mem, "/d")
			write(t, s, 10)
			tog := errorfs.NewToggle(c.pred)
			tog.On()
			s.fs = errorfs.Wrap(mem, tog)
			k, err := s.Create(1, 20, 3, testConf, 2, nil)
			if err == nil {
				if _, err = k.Write(state(20)); err != nil {
					_ = k.Cancel()
				} else {
					err = k.Close()
				}
			}
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("a snapshot on a disk that fails its %s: %v", c.name, err)
			}
			check(t, s, 10)
			entries, _ := mem.ReadDir("/d/snapshots")
			if len(entries) != 1 {
				t.Fatalf("left behind: %v", entries)
			}
			tog.Off()
			write(t, s, 30)
			check(t, s, 30, 10)
		})
	}
}
