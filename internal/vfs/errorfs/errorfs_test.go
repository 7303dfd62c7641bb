package errorfs

import (
	"errors"
	"os"
	"testing"

	"github.com/causeway-db/causeway/internal/vfs"
)

func TestInjectors(t *testing.T) {
	write := func(fs vfs.FS, name string) error {
		f, err := fs.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("x")); err != nil {
			return err
		}
		return f.Sync()
	}
	cases := []struct {
		name string
		inj  Injector
		want []bool // whether each of five writes fails
	}{
		{"nothing", InjectorFunc(func(Op) error { return nil }), []bool{false, false, false, false, false}},
		{"the second sync", OnIndex(1, Syncs), []bool{false, true, false, false, false}},
		{"every sync from the third", FromIndex(2, Syncs), []bool{false, false, true, true, true}},
		{"the fourth write-like op", OnIndex(3, Writes), []bool{false, true, false, false, false}}, // create, write, sync, create
		{"only under /other", FromIndex(0, Under("/other", Any)), []bool{false, false, false, false, false}},
		{"only under /d", FromIndex(0, Under("/d", Any)), []bool{true, true, true, true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/d", 0o700); err != nil {
				t.Fatal(err)
			}
			fs := Wrap(mem, c.inj)
			for i, fail := range c.want {
				err := write(fs, "/d/f")
				if fail != (err != nil) || (err != nil && !errors.Is(err, ErrInjected)) {
					t.Fatalf("write %d: %v; want failure %v", i, err, fail)
				}
			}
		})
	}
}

// TestInjectedOperationsDoNothing: a failed operation has no effect.
func TestInjectedOperationsDoNothing(t *testing.T) {
	mem := vfs.NewMem()
	tog := NewToggle(Writes)
	fs := Wrap(mem, tog)
	if err := fs.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	tog.On()
	if _, err := f.WriteAt([]byte("lost"), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("WriteAt: %v", err)
	}
	if err := fs.Rename("/d/f", "/d/g"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Rename: %v", err)
	}
	if err := fs.MkdirAll("/e", 0o700); !errors.Is(err, ErrInjected) {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := vfs.SyncDir(fs, "/d"); !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncDir: %v", err)
	}
	if _, err := fs.Stat("/d/f"); err != nil { // reads still work
		t.Fatalf("Stat: %v", err)
	}
	tog.Off()
	if fi, err := fs.Stat("/d/f"); err != nil || fi.Size() != 0 {
		t.Fatalf("after the failed write: %v, %v", fi, err)
	}
	if _, err := mem.Stat("/e"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("failed MkdirAll created /e: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCounterCounts(t *testing.T) {
	c := OnIndex(100, Syncs)
	fs := Wrap(vfs.NewMem(), c)
	for i := 0; i < 3; i++ {
		if err := vfs.SyncDir(fs, "/"); err != nil {
			t.Fatal(err)
		}
	}
	if c.Count() != 3 {
		t.Fatalf("Count = %d", c.Count())
	}
}
