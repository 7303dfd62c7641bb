package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// step is one operation of a script, run on a file system rooted at dir.
// It returns a short description of the outcome (what was read, or the
// error's cause), which must be the same on MemFS and on the real file
// system.
type step func(fs FS, dir string) string

func outcome(err error) string {
	for _, cause := range []error{os.ErrNotExist, os.ErrExist, os.ErrClosed, syscall.ENOTDIR, syscall.EISDIR, syscall.ENOTEMPTY, syscall.EINVAL} {
		if errors.Is(err, cause) {
			return "error: " + cause.Error()
		}
	}
	if err != nil {
		return "error"
	}
	return "ok"
}

func writeFile(name, data string) step {
	return func(fs FS, dir string) string {
		f, err := fs.Create(filepath.Join(dir, name))
		if err != nil {
			return outcome(err)
		}
		defer f.Close()
		_, err = f.Write([]byte(data))
		return outcome(err)
	}
}

func readFile(name string) step {
	return func(fs FS, dir string) string {
		f, err := fs.Open(filepath.Join(dir, name))
		if err != nil {
			return outcome(err)
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return outcome(err)
		}
		return fmt.Sprintf("%q", b)
	}
}

func withFile(name string, flag int, fn func(f File) string) step {
	return func(fs FS, dir string) string {
		f, err := fs.OpenFile(filepath.Join(dir, name), flag, 0o600)
		if err != nil {
			return outcome(err)
		}
		defer f.Close()
		return fn(f)
	}
}

func stat(name string) step {
	return func(fs FS, dir string) string {
		fi, err := fs.Stat(filepath.Join(dir, name))
		if err != nil {
			return outcome(err)
		}
		return fmt.Sprintf("dir=%v size=%d", fi.IsDir(), map[bool]int64{true: 0, false: fi.Size()}[fi.IsDir()])
	}
}

func listDir(name string) step {
	return func(fs FS, dir string) string {
		es, err := fs.ReadDir(filepath.Join(dir, name))
		if err != nil {
			return outcome(err)
		}
		var out []string
		for _, e := range es {
			s := e.Name()
			if e.IsDir() {
				s += "/"
			}
			out = append(out, s)
		}
		return strings.Join(out, ",")
	}
}

func op(fn func(fs FS, dir string) error) step {
	return func(fs FS, dir string) string { return outcome(fn(fs, dir)) }
}

// TestMemMatchesOS runs scripts of file-system operations on MemFS and on
// the real file system and requires the same outcome at every step.
func TestMemMatchesOS(t *testing.T) {
	j := filepath.Join
	cases := []struct {
		name  string
		steps []step
	}{
		{"create, write, read back", []step{writeFile("a", "hello"), readFile("a"), stat("a"), readFile("missing")}},
		{"create truncates", []step{writeFile("a", "hello"), writeFile("a", "x"), readFile("a")}},
		{"O_EXCL refuses an existing file", []step{
			writeFile("a", "1"),
			withFile("a", os.O_RDWR|os.O_CREATE|os.O_EXCL, func(File) string { return "opened" }),
			withFile("b", os.O_RDWR|os.O_CREATE|os.O_EXCL, func(File) string { return "opened" }),
			stat("b"),
		}},
		{"open without O_CREATE", []step{withFile("a", os.O_RDWR, func(File) string { return "opened" })}},
		{"O_APPEND appends", []step{
			writeFile("a", "abc"),
			withFile("a", os.O_WRONLY|os.O_APPEND, func(f File) string {
				_, err := f.Write([]byte("def"))
				return outcome(err)
			}),
			readFile("a"),
		}},
		{"O_TRUNC on open", []step{
			writeFile("a", "abc"),
			withFile("a", os.O_RDWR|os.O_TRUNC, func(File) string { return "opened" }),
			stat("a"),
		}},
		{"WriteAt past the end leaves a hole of zeros", []step{
			withFile("a", os.O_RDWR|os.O_CREATE, func(f File) string {
				if _, err := f.WriteAt([]byte("xy"), 10000); err != nil {
					return outcome(err)
				}
				b := make([]byte, 6)
				n, err := f.ReadAt(b, 9998)
				return fmt.Sprintf("%d %q %v", n, b, err)
			}),
			stat("a"),
		}},
		{"ReadAt at and past the end", []step{
			writeFile("a", "abcdef"),
			withFile("a", os.O_RDONLY, func(f File) string {
				b := make([]byte, 4)
				n1, err1 := f.ReadAt(b, 4)
				n2, err2 := f.ReadAt(b, 6)
				n3, err3 := f.ReadAt(b, 100)
				return fmt.Sprintf("%d %v %d %v %d %v %q", n1, err1, n2, err2, n3, err3, b[:n1])
			}),
		}},
		{"sequential reads", []step{
			writeFile("a", strings.Repeat("0123456789", 1000)),
			withFile("a", os.O_RDONLY, func(f File) string {
				b := make([]byte, 4096)
				var sizes []int
				for {
					n, err := f.Read(b)
					sizes = append(sizes, n)
					if err != nil {
						return fmt.Sprint(sizes, err)
					}
				}
			}),
		}},
		{"truncate shrinks then grows with zeros", []step{
			writeFile("a", strings.Repeat("x", 9000)),
			withFile("a", os.O_RDWR, func(f File) string {
				if err := f.Truncate(4100); err != nil {
					return outcome(err)
				}
				if err := f.Truncate(9000); err != nil {
					return outcome(err)
				}
				b := make([]byte, 8)
				n, err := f.ReadAt(b, 4096)
				return fmt.Sprintf("%d %q %v", n, b, err)
			}),
			stat("a"),
		}},
		{"preallocate grows, never shrinks", []step{
			writeFile("a", "abc"),
			withFile("a", os.O_RDWR, func(f File) string {
				if err := f.Preallocate(8192); err != nil {
					return outcome(err)
				}
				if err := f.Preallocate(10); err != nil {
					return outcome(err)
				}
				fi, err := f.Stat()
				if err != nil {
					return outcome(err)
				}
				b := make([]byte, 5)
				n, _ := f.ReadAt(b, 0)
				return fmt.Sprintf("size=%d %q", fi.Size(), b[:n])
			}),
		}},
		{"writes to a read-only file fail", []step{
			writeFile("a", "abc"),
			withFile("a", os.O_RDONLY, func(f File) string {
				_, err := f.Write([]byte("x"))
				return fmt.Sprint(err != nil)
			}),
		}},
		{"closed file", []step{
			writeFile("a", "abc"),
			withFile("a", os.O_RDONLY, func(f File) string {
				_ = f.Close()
				_, err := f.Read(make([]byte, 1))
				return outcome(err)
			}),
		}},
		{"directories", []step{
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "x", "y", "z"), 0o700) }),
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "x", "y"), 0o700) }),
			writeFile(j("x", "f"), "1"),
			writeFile(j("x", "e"), "1"),
			listDir("x"),
			stat("x"),
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "x", "f", "g"), 0o700) }),
			op(func(fs FS, d string) error { return fs.Remove(j(d, "x")) }),
			op(func(fs FS, d string) error { return fs.Remove(j(d, "x", "y", "z")) }),
			op(func(fs FS, d string) error { return fs.Remove(j(d, "x", "nothing")) }),
			listDir(j("x", "y")),
			listDir(j("x", "f")),
			listDir("nothing"),
			op(func(fs FS, d string) error { return fs.RemoveAll(j(d, "x")) }),
			op(func(fs FS, d string) error { return fs.RemoveAll(j(d, "x")) }),
			stat("x"),
			writeFile(j("x", "f"), "1"),
		}},
		{"open a directory", []step{
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "x"), 0o700) }),
			withFile("x", os.O_RDWR, func(File) string { return "opened" }),
			op(func(fs FS, d string) error {
				f, err := fs.OpenDir(j(d, "x"))
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Sync()
			}),
			op(func(fs FS, d string) error {
				_, err := fs.OpenDir(j(d, "missing"))
				return err
			}),
		}},
		{"rename files", []step{
			writeFile("a", "A"),
			writeFile("b", "B"),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "b")) }),
			readFile("a"),
			readFile("b"),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "c")) }),
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "dir"), 0o700) }),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "b"), j(d, "dir")) }),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "b"), j(d, "dir", "b")) }),
			readFile(j("dir", "b")),
			listDir(""),
		}},
		{"rename directories", []step{
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "a", "sub"), 0o700) }),
			writeFile(j("a", "f"), "F"),
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "empty"), 0o700) }),
			op(func(fs FS, d string) error { return fs.MkdirAll(j(d, "full", "x"), 0o700) }),
			writeFile("file", "1"),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "full")) }),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "file")) }),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "a", "sub", "a")) }),
			op(func(fs FS, d string) error { return fs.Rename(j(d, "a"), j(d, "empty")) }),
			readFile(j("empty", "f")),
			listDir(""),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			osDir := t.TempDir()
			mem := NewMem()
			memDir := "/data/x"
			if err := mem.MkdirAll(memDir, 0o700); err != nil {
				t.Fatal(err)
			}
			for i, s := range c.steps {
				want, got := s(Default, osDir), s(mem, memDir)
				if want != got {
					t.Fatalf("step %d: os: %s; mem: %s\nmem:\n%s", i, want, got, mem)
				}
			}
		})
	}
}

// state describes the files under dir: name → contents, directories as
// "<dir>".
func state(t *testing.T, fs FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(d, rel string)
	walk = func(d, rel string) {
		es, err := fs.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			p, r := filepath.Join(d, e.Name()), filepath.Join(rel, e.Name())
			if e.IsDir() {
				out[r] = "<dir>"
				walk(p, r)
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[r] = string(bytes.TrimRight(b, "\x00")) + fmt.Sprintf("|%d", len(b))
		}
	}
	walk(dir, "")
	return out
}

// TestCrashClone: CrashClone keeps what was synced and only that.
func TestCrashClone(t *testing.T) {
	const d = "/d"
	j := filepath.Join
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(t *testing.T, fs *MemFS, name, data string, sync bool) File {
		t.Helper()
		f, err := fs.Create(j(d, name))
		must(t, err)
		_, err = f.Write([]byte(data))
		must(t, err)
		if sync {
			must(t, f.Sync())
		}
		return f
	}
	syncDir := func(t *testing.T, fs *MemFS, name string) {
		t.Helper()
		must(t, SyncDir(fs, j(d, name)))
	}
	cases := []struct {
		name string
		run  func(t *testing.T, fs *MemFS)
		want map[string]string // the crash image of /d
	}{
		{"unsynced file vanishes", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", false)
		}, map[string]string{}},
		{"synced data without a directory sync vanishes", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", true)
		}, map[string]string{}},
		{"synced entry without a data sync is empty", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", false)
			syncDir(t, fs, "")
		}, map[string]string{"a": "|0"}},
		{"synced data and entry survive", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", true)
			syncDir(t, fs, "")
		}, map[string]string{"a": "x|1"}},
		{"writes after the sync are lost", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", "old", true)
			syncDir(t, fs, "")
			_, err := f.WriteAt([]byte("NEW!"), 0)
			must(t, err)
		}, map[string]string{"a": "old|3"}},
		{"SyncData makes data durable", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", "old", true)
			syncDir(t, fs, "")
			_, err := f.WriteAt([]byte("NEW!"), 0)
			must(t, err)
			must(t, f.SyncData())
		}, map[string]string{"a": "NEW!|4"}},
		{"a sync through another handle counts", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "abc", false)
			syncDir(t, fs, "")
			f, err := fs.Open(j(d, "a"))
			must(t, err)
			must(t, f.Sync())
		}, map[string]string{"a": "abc|3"}},
		{"unsynced truncate is lost", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", strings.Repeat("z", 10000), true)
			syncDir(t, fs, "")
			must(t, f.Truncate(3))
		}, map[string]string{"a": strings.Repeat("z", 10000) + "|10000"}},
		{"synced truncate, then unsynced regrowth", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", strings.Repeat("z", 10000), true)
			syncDir(t, fs, "")
			must(t, f.Truncate(3))
			must(t, f.Sync())
			_, err := f.WriteAt([]byte("y"), 9999)
			must(t, err)
		}, map[string]string{"a": "zzz|3"}},
		{"synced truncate, then regrowth reads zeros", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", strings.Repeat("z", 10000), true)
			syncDir(t, fs, "")
			must(t, f.Truncate(3))
			_, err := f.WriteAt([]byte("y"), 9999)
			must(t, err)
			must(t, f.Sync())
		}, map[string]string{"a": "zzz" + strings.Repeat("\x00", 9996) + "y|10000"}},
		{"unsynced preallocation is lost", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", "abc", true)
			syncDir(t, fs, "")
			must(t, f.Preallocate(1<<20))
		}, map[string]string{"a": "abc|3"}},
		{"synced preallocation", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", "abc", false)
			syncDir(t, fs, "")
			must(t, f.Preallocate(1<<16))
			_, err := f.WriteAt([]byte("d"), 3)
			must(t, err)
			must(t, f.SyncData())
		}, map[string]string{"a": fmt.Sprintf("abcd|%d", 1<<16)}},
		{"rename without a directory sync keeps the old name", func(t *testing.T, fs *MemFS) {
			create(t, fs, "tmp", "v", true)
			syncDir(t, fs, "")
			must(t, fs.Rename(j(d, "tmp"), j(d, "final")))
		}, map[string]string{"tmp": "v|1"}},
		{"rename made durable by one directory sync", func(t *testing.T, fs *MemFS) {
			create(t, fs, "tmp", "v", true)
			must(t, fs.Rename(j(d, "tmp"), j(d, "final")))
			syncDir(t, fs, "")
		}, map[string]string{"final": "v|1"}},
		{"rename over a file without a sync keeps the old target", func(t *testing.T, fs *MemFS) {
			create(t, fs, "cur", "old", true)
			create(t, fs, "tmp", "new", true)
			syncDir(t, fs, "")
			must(t, fs.Rename(j(d, "tmp"), j(d, "cur")))
		}, map[string]string{"cur": "old|3", "tmp": "new|3"}},
		{"rename across directories, only the target synced: both names", func(t *testing.T, fs *MemFS) {
			must(t, MkdirAllSync(fs, j(d, "x"), 0o700))
			must(t, MkdirAllSync(fs, j(d, "y"), 0o700))
			create(t, fs, "x/f", "v", true)
			syncDir(t, fs, "x")
			must(t, fs.Rename(j(d, "x", "f"), j(d, "y", "f")))
			syncDir(t, fs, "y")
		}, map[string]string{"x": "<dir>", "y": "<dir>", "x/f": "v|1", "y/f": "v|1"}},
		{"unsynced remove comes back", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", true)
			syncDir(t, fs, "")
			must(t, fs.Remove(j(d, "a")))
		}, map[string]string{"a": "x|1"}},
		{"synced remove", func(t *testing.T, fs *MemFS) {
			create(t, fs, "a", "x", true)
			syncDir(t, fs, "")
			must(t, fs.Remove(j(d, "a")))
			syncDir(t, fs, "")
		}, map[string]string{}},
		{"unsynced RemoveAll comes back whole", func(t *testing.T, fs *MemFS) {
			must(t, MkdirAllSync(fs, j(d, "x", "y"), 0o700))
			create(t, fs, "x/y/f", "1", true)
			syncDir(t, fs, "x/y")
			must(t, fs.RemoveAll(j(d, "x")))
		}, map[string]string{"x": "<dir>", "x/y": "<dir>", "x/y/f": "1|1"}},
		{"a removed file's handle still writes, but the name stays gone", func(t *testing.T, fs *MemFS) {
			f := create(t, fs, "a", "x", true)
			syncDir(t, fs, "")
			must(t, fs.Remove(j(d, "a")))
			syncDir(t, fs, "")
			_, err := f.Write([]byte("y"))
			must(t, err)
			must(t, f.Sync())
		}, map[string]string{}},
		{"MkdirAll without syncs vanishes", func(t *testing.T, fs *MemFS) {
			must(t, fs.MkdirAll(j(d, "x", "y"), 0o700))
			create(t, fs, "x/y/f", "1", true)
			syncDir(t, fs, "x/y")
		}, map[string]string{}},
		{"MkdirAllSync survives", func(t *testing.T, fs *MemFS) {
			must(t, MkdirAllSync(fs, j(d, "x", "y"), 0o700))
			create(t, fs, "x/y/f", "1", true)
			syncDir(t, fs, "x/y")
		}, map[string]string{"x": "<dir>", "x/y": "<dir>", "x/y/f": "1|1"}},
		{"a synced directory whose own name is unsynced vanishes", func(t *testing.T, fs *MemFS) {
			must(t, MkdirAllSync(fs, j(d, "x"), 0o700))
			must(t, fs.MkdirAll(j(d, "x", "y"), 0o700))
			create(t, fs, "x/y/f", "1", true)
			syncDir(t, fs, "x/y")
		}, map[string]string{"x": "<dir>"}},
		{"snapshot protocol: temp dir, sync files and dir, rename, sync parent", func(t *testing.T, fs *MemFS) {
			must(t, fs.MkdirAll(j(d, "snap.tmp"), 0o700))
			create(t, fs, "snap.tmp/state", "S", true)
			create(t, fs, "snap.tmp/meta", "M", true)
			syncDir(t, fs, "snap.tmp")
			must(t, fs.Rename(j(d, "snap.tmp"), j(d, "snap")))
			syncDir(t, fs, "")
		}, map[string]string{"snap": "<dir>", "snap/state": "S|1", "snap/meta": "M|1"}},
		{"snapshot protocol without the temp dir's sync loses its files", func(t *testing.T, fs *MemFS) {
			must(t, fs.MkdirAll(j(d, "snap.tmp"), 0o700))
			create(t, fs, "snap.tmp/state", "S", true)
			must(t, fs.Rename(j(d, "snap.tmp"), j(d, "snap")))
			syncDir(t, fs, "")
		}, map[string]string{"snap": "<dir>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := NewMem()
			must(t, MkdirAllSync(fs, d, 0o700))
			c.run(t, fs)
			before := state(t, fs, d)
			img := fs.CrashClone()
			got := state(t, img, d)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("crash image:\n got %v\nwant %v\n(before the crash: %v)", got, c.want, before)
			}
			// The original is unchanged, and the image is durable as a
			// whole: cloning it again changes nothing.
			if after := state(t, fs, d); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("CrashClone changed the original: %v, was %v", after, before)
			}
			if again := state(t, img.CrashClone(), d); fmt.Sprint(again) != fmt.Sprint(got) {
				t.Fatalf("image of the image: %v, want %v", again, got)
			}
		})
	}
}

// TestCrashCloneIsIndependent: writes to an image do not reach the
// original, nor the other way round, including through shared pages.
func TestCrashCloneIsIndependent(t *testing.T) {
	fs := NewMem()
	if err := MkdirAllSync(fs, "/d", 0o700); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.Create("/d/a")
	_, _ = f.Write([]byte("original"))
	_ = f.Sync()
	_ = SyncDir(fs, "/d")
	img := fs.CrashClone()
	g, err := img.OpenFile("/d/a", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = g.WriteAt([]byte("IMAGE"), 0)
	_ = g.Sync()
	_, _ = f.WriteAt([]byte("ORIG"), 0)
	_ = f.Sync()
	if s := state(t, fs, "/d")["a"]; s != "ORIGinal|8" {
		t.Fatalf("original: %s", s)
	}
	if s := state(t, img, "/d")["a"]; s != "IMAGEnal|8" {
		t.Fatalf("image: %s", s)
	}
}

// TestMkdirAllSyncOnAFile: a path through a file is refused.
func TestMkdirAllSyncOnAFile(t *testing.T) {
	fs := NewMem()
	f, _ := fs.Create("/f")
	_ = f.Close()
	for _, p := range []string{"/f", "/f/g"} {
		if err := MkdirAllSync(fs, p, 0o700); !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("MkdirAllSync(%s): %v", p, err)
		}
	}
}

// TestConcurrentCrashClones: writers that sync and record what they synced
// run while images are taken; every image holds at least what was synced
// before it was taken. (Run with -race.)
func TestConcurrentCrashClones(t *testing.T) {
	fs := NewMem()
	if err := MkdirAllSync(fs, "/d", 0o700); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 4, 200
	var mu sync.Mutex
	durable := make([]int64, writers) // bytes each writer's file has synced
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("/d/f%d", w)
			f, err := fs.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if err := SyncDir(fs, "/d"); err != nil {
				t.Error(err)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var off int64
			for i := 0; i < rounds; i++ {
				b := bytes.Repeat([]byte{byte('a' + w)}, 1+rng.IntN(6000))
				if _, err := f.WriteAt(b, off); err != nil {
					t.Error(err)
					return
				}
				off += int64(len(b))
				if err := f.SyncData(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				durable[w] = off
				mu.Unlock()
			}
		}(w)
	}
	for i := 0; i < 50; i++ {
		mu.Lock()
		want := append([]int64(nil), durable...)
		img := fs.CrashClone()
		mu.Unlock()
		for w, n := range want {
			if n == 0 {
				continue
			}
			fi, err := img.Stat(fmt.Sprintf("/d/f%d", w))
			if err != nil || fi.Size() < n {
				t.Fatalf("image %d: f%d: %v, %v; want at least %d bytes", i, w, fi, err, n)
			}
			f, _ := img.Open(fmt.Sprintf("/d/f%d", w))
			b := make([]byte, fi.Size())
			if _, err := io.ReadFull(f, b); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			if bytes.Count(b, []byte{byte('a' + w)}) != len(b) {
				t.Fatalf("image %d: f%d holds foreign bytes", i, w)
			}
		}
	}
	wg.Wait()
}
