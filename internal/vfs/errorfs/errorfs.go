package errorfs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/causeway-db/causeway/internal/vfs"
)

// ErrInjected is wrapped by every error an injector makes an operation
// return.
var ErrInjected = errors.New("errorfs: injected error")

// OpKind is a kind of file-system operation.
type OpKind int

// The operation kinds.
const (
	// OpCreate is Create, and OpenFile with os.O_CREATE.
	OpCreate OpKind = iota + 1
	// OpOpen is Open, OpenFile without os.O_CREATE, and OpenDir.
	OpOpen
	// OpRead is File.Read and File.ReadAt.
	OpRead
	// OpWrite is File.Write and File.WriteAt.
	OpWrite
	// OpSync is File.Sync and File.SyncData, of files and directories.
	OpSync
	// OpTruncate is File.Truncate and File.Preallocate.
	OpTruncate
	// OpMkdir is MkdirAll.
	OpMkdir
	// OpRemove is Remove and RemoveAll.
	OpRemove
	// OpRename is Rename.
	OpRename
	// OpList is ReadDir and Stat (of a name or a File).
	OpList
	// OpClose is File.Close. An injected error still closes the file.
	OpClose
)

var kindNames = map[OpKind]string{
	OpCreate: "create", OpOpen: "open", OpRead: "read", OpWrite: "write", OpSync: "sync",
	OpTruncate: "truncate", OpMkdir: "mkdir", OpRemove: "remove", OpRename: "rename", OpList: "list", OpClose: "close",
}

// String names k.
func (k OpKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "unknown"
}

// Op is one operation about to run.
type Op struct {
	Kind OpKind
	// Path is the name the operation is about (the old name of a
	// rename), or the name a File was opened with.
	Path string
	// Offset is where a ReadAt or WriteAt starts (0 otherwise).
	Offset int64
}

// Predicate chooses operations.
type Predicate func(Op) bool

// Writes is true for every operation that changes the file system:
// creating, writing, truncating, syncing, making directories, removing and
// renaming.
func Writes(op Op) bool {
	switch op.Kind {
	case OpCreate, OpWrite, OpSync, OpTruncate, OpMkdir, OpRemove, OpRename:
		return true
	}
	return false
}

// Syncs is true for File.Sync and File.SyncData.
func Syncs(op Op) bool { return op.Kind == OpSync }

// Any is true for every operation.
func Any(Op) bool { return true }

// Under returns a predicate true for operations on dir or a name below it.
func Under(dir string, p Predicate) Predicate {
	return func(op Op) bool {
		return (op.Path == dir || strings.HasPrefix(op.Path, strings.TrimSuffix(dir, string(os.PathSeparator))+string(os.PathSeparator))) && p(op)
	}
}

// Injector decides whether an operation fails.
type Injector interface {
	// MaybeError returns nil to let op run, or the error it returns.
	MaybeError(op Op) error
}

// InjectorFunc is an Injector.
type InjectorFunc func(Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

func injected(op Op) error {
	return fmt.Errorf("%w: %s %s", ErrInjected, op.Kind, op.Path)
}

// Counter counts the operations a predicate matches and fails some of
// them.
type Counter struct {
	pred     Predicate
	from, to int64 // fails matches [from, to)
	n        atomic.Int64
}

// OnIndex fails the n-th operation (counting from 0) that pred matches,
// and only that one.
func OnIndex(n int64, pred Predicate) *Counter { return &Counter{pred: pred, from: n, to: n + 1} }

// FromIndex fails every operation that pred matches from the n-th on (a
// disk that stays broken).
func FromIndex(n int64, pred Predicate) *Counter { return &Counter{pred: pred, from: n, to: -1} }

// MaybeError implements Injector.
func (c *Counter) MaybeError(op Op) error {
	if !c.pred(op) {
		return nil
	}
	i := c.n.Add(1) - 1
	if i >= c.from && (c.to < 0 || i < c.to) {
		return injected(op)
	}
	return nil
}

// Count returns how many operations pred matched so far.
func (c *Counter) Count() int64 { return c.n.Load() }

// Toggle fails the operations a predicate matches while it is on. It
// starts off.
type Toggle struct {
	pred Predicate
	on   atomic.Bool
}

// NewToggle returns a Toggle for pred, off.
func NewToggle(pred Predicate) *Toggle { return &Toggle{pred: pred} }

// On makes matching operations fail.
func (t *Toggle) On() { t.on.Store(true) }

// Off lets every operation run.
func (t *Toggle) Off() { t.on.Store(false) }

// MaybeError implements Injector.
func (t *Toggle) MaybeError(op Op) error {
	if t.on.Load() && t.pred(op) {
		return injected(op)
	}
	return nil
}

// Wrap returns fs with every operation first shown to inj.
func Wrap(fs vfs.FS, inj Injector) vfs.FS { return &errFS{fs: fs, inj: inj} }

type errFS struct {
	fs  vfs.FS
	inj Injector
}

func (e *errFS) maybe(kind OpKind, path string) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: path})
}

func (e *errFS) file(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &errFile{f: f, name: name, inj: e.inj}, nil
}

func (e *errFS) Create(name string) (vfs.File, error) {
	if err := e.maybe(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	return e.file(f, name, err)
}

func (e *errFS) Open(name string) (vfs.File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	return e.file(f, name, err)
}

func (e *errFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	kind := OpOpen
	if flag&os.O_CREATE != 0 {
		kind = OpCreate
	}
	if err := e.maybe(kind, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenFile(name, flag, perm)
	return e.file(f, name, err)
}

func (e *errFS) OpenDir(name string) (vfs.File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenDir(name)
	return e.file(f, name, err)
}

func (e *errFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.maybe(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errFS) Remove(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errFS) RemoveAll(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errFS) Rename(oldname, newname string) error {
	if err := e.maybe(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := e.maybe(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(dir)
}

func (e *errFS) Stat(name string) (os.FileInfo, error) {
	if err := e.maybe(OpList, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

type errFile struct {
	f    vfs.File
	name string
	inj  Injector
}

func (e *errFile) maybe(kind OpKind, off int64) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: e.name, Offset: off})
}

func (e *errFile) Read(b []byte) (int, error) {
	if err := e.maybe(OpRead, 0); err != nil {
		return 0, err
	}
	return e.f.Read(b)
}

func (e *errFile) ReadAt(b []byte, off int64) (int, error) {
	if err := e.maybe(OpRead, off); err != nil {
		return 0, err
	}
	return e.f.ReadAt(b, off)
}

func (e *errFile) Write(b []byte) (int, error) {
	if err := e.maybe(OpWrite, 0); err != nil {
		return 0, err
	}
	return e.f.Write(b)
}

func (e *errFile) WriteAt(b []byte, off int64) (int, error) {
	if err := e.maybe(OpWrite, off); err != nil {
		return 0, err
	}
	return e.f.WriteAt(b, off)
}

func (e *errFile) Close() error {
	err := e.maybe(OpClose, 0)
	if cerr := e.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e *errFile) Stat() (os.FileInfo, error) {
	if err := e.maybe(OpList, 0); err != nil {
		return nil, err
	}
	return e.f.Stat()
}

func (e *errFile) Sync() error {
	if err := e.maybe(OpSync, 0); err != nil {
		return err
	}
	return e.f.Sync()
}

func (e *errFile) SyncData() error {
	if err := e.maybe(OpSync, 0); err != nil {
		return err
	}
	return e.f.SyncData()
}

func (e *errFile) Truncate(size int64) error {
	if err := e.maybe(OpTruncate, 0); err != nil {
		return err
	}
	return e.f.Truncate(size)
}

func (e *errFile) Preallocate(size int64) error {
	if err := e.maybe(OpTruncate, 0); err != nil {
		return err
	}
	return e.f.Preallocate(size)
}
