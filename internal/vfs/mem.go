package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	errNotDir   = syscall.ENOTDIR
	errIsDir    = syscall.EISDIR
	errNotEmpty = syscall.ENOTEMPTY
	errBadFD    = syscall.EBADF
	errInvalid  = syscall.EINVAL
)

// pageSize is the unit in which MemFS stores file contents: a file's
// memory and the cost of a Sync follow the pages written, not its size
// (a preallocated segment costs nothing until it is written).
const pageSize = 4096

// MemFS is an in-memory file system that tracks what was made durable;
// see the package documentation for its crash model. The zero value is not
// usable; call NewMem.
type MemFS struct {
	mu   sync.Mutex
	root *memNode // REQUIRES: mu for every node below it
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty in-memory file system (its root directory only).
func NewMem() *MemFS {
	return &MemFS{root: newDir(0o755)}
}

// memNode is a file or a directory (an inode: several names may refer to
// one node in a crash image, see CrashClone).
type memNode struct {
	dir  bool
	mode os.FileMode

	// Directory: the current entries and those made durable by the
	// directory's last Sync.
	children, synced map[string]*memNode

	// File: the current size and pages (a missing page reads as zeros),
	// and the durable ones. A page slice in syncedPages is never written
	// again: the first write to a page after a Sync copies it (dirty
	// marks the pages copied or changed since the last Sync).
	size, syncedSize   int64
	pages, syncedPages map[int64][]byte
	dirty              map[int64]bool
}

func newDir(perm os.FileMode) *memNode {
	return &memNode{dir: true, mode: fs.ModeDir | perm.Perm(), children: map[string]*memNode{}, synced: map[string]*memNode{}}
}

func newFile(perm os.FileMode) *memNode {
	return &memNode{mode: perm.Perm(), pages: map[int64][]byte{}, syncedPages: map[int64][]byte{}, dirty: map[int64]bool{}}
}

// split cleans name into its path components below the root.
func split(name string) []string {
	name = filepath.ToSlash(filepath.Clean(name))
	var out []string
	for _, c := range strings.Split(name, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// lookup returns the node named by parts. REQUIRES: m.mu.
func (m *MemFS) lookup(op, name string, parts []string) (*memNode, error) {
	n := m.root
	for _, c := range parts {
		if !n.dir {
			return nil, &os.PathError{Op: op, Path: name, Err: errNotDir}
		}
		if c == ".." {
			return nil, &os.PathError{Op: op, Path: name, Err: errInvalid}
		}
		child := n.children[c]
		if child == nil {
			return nil, &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
		}
		n = child
	}
	return n, nil
}

// parent returns the directory holding name and name's last component.
// REQUIRES: m.mu.
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &os.PathError{Op: op, Path: name, Err: errInvalid}
	}
	dir, err := m.lookup(op, name, parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", &os.PathError{Op: op, Path: name, Err: errNotDir}
	}
	return dir, parts[len(parts)-1], nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// OpenDir implements FS.
func (m *MemFS) OpenDir(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name, split(name))
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotDir}
	}
	return &memFile{fs: m, n: n, name: name, read: true}, nil
}

const supportedFlags = os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_TRUNC | os.O_APPEND

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&^supportedFlags != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: errInvalid}
	}
	access := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	read, write := access != os.O_WRONLY, access != os.O_RDONLY
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("open", name)
	if err != nil {
		if len(split(name)) == 0 && !write { // the root
			return &memFile{fs: m, n: m.root, name: name, read: true}, nil
		}
		return nil, err
	}
	n := dir.children[base]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case n == nil:
		n = newFile(perm)
		dir.children[base] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case n.dir && write:
		return nil, &os.PathError{Op: "open", Path: name, Err: errIsDir}
	}
	if flag&os.O_TRUNC != 0 && write && !n.dir {
		n.truncate(0)
	}
	return &memFile{fs: m, n: n, name: name, read: read, write: write, append: flag&os.O_APPEND != 0}, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, c := range split(dir) {
		if c == ".." {
			return &os.PathError{Op: "mkdir", Path: dir, Err: errInvalid}
		}
		child := n.children[c]
		if child == nil {
			child = newDir(perm)
			n.children[c] = child
		}
		if !child.dir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
		}
		n = child
	}
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	switch {
	case n == nil:
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	case n.dir && len(n.children) > 0:
		return &os.PathError{Op: "remove", Path: name, Err: errNotEmpty}
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll implements FS. Like unlink, it only removes the name: open
// handles of files below it keep working.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("removeall", name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	delete(dir.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	odir, obase, err := m.parent("rename", oldname)
	if err != nil {
		return linkErr(err)
	}
	n := odir.children[obase]
	if n == nil {
		return linkErr(os.ErrNotExist)
	}
	ndir, nbase, err := m.parent("rename", newname)
	if err != nil {
		return linkErr(err)
	}
	if n.dir {
		// A directory cannot move below itself.
		op, np := split(oldname), split(newname)
		if len(np) > len(op) && slices.Equal(np[:len(op)], op) {
			return linkErr(errInvalid)
		}
	}
	if old := ndir.children[nbase]; old != nil && old != n {
		switch {
		case old.dir:
			// As os.Rename: never over a directory, even an empty one.
			return linkErr(os.ErrExist)
		case n.dir:
			return linkErr(errNotDir)
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]os.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", dir, split(dir))
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: errNotDir}
	}
	names := slices.Sorted(maps.Keys(n.children))
	out := make([]os.DirEntry, len(names))
	for i, name := range names {
		out[i] = fs.FileInfoToDirEntry(n.children[name].info(name))
	}
	return out, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := split(name)
	n, err := m.lookup("stat", name, parts)
	if err != nil {
		return nil, err
	}
	base := "/"
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	return n.info(base), nil
}

// CrashClone returns the image a power loss at this instant would leave:
// a new MemFS holding only what was durable (see the package
// documentation), itself entirely durable. m is not changed and may go on
// being used.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c := seen[n]; c != nil {
			return c // a second name of one node
		}
		c := &memNode{dir: n.dir, mode: n.mode}
		seen[n] = c
		if n.dir {
			c.children = make(map[string]*memNode, len(n.synced))
			for name, child := range n.synced {
				c.children[name] = clone(child)
			}
			c.synced = maps.Clone(c.children)
			return c
		}
		c.size, c.syncedSize = n.syncedSize, n.syncedSize
		c.pages, c.syncedPages, c.dirty = make(map[int64][]byte, len(n.syncedPages)), make(map[int64][]byte, len(n.syncedPages)), map[int64]bool{}
		for p, b := range n.syncedPages {
			// Durable pages are never written in place, so the clone can
			// share them; its writes copy first (dirty is empty).
			c.pages[p], c.syncedPages[p] = b, b
		}
		return c
	}
	return &MemFS{root: clone(m.root)}
}

// String lists every file and directory with its size, for test failures.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(n *memNode, path string, depth int)
	walk = func(n *memNode, path string, depth int) {
		if depth > 64 {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			if c.dir {
				b.WriteString(path + "/" + name + "/\n")
				walk(c, path+"/"+name, depth+1)
				continue
			}
			b.WriteString(path + "/" + name + " " + strconv.FormatInt(c.size, 10) + "\n")
		}
	}
	walk(m.root, "", 0)
	return b.String()
}

func (n *memNode) info(name string) os.FileInfo {
	return memInfo{name: name, size: n.size, mode: n.mode}
}

// page returns page p for writing, copying it if it is shared with the
// durable state. REQUIRES: fs.mu.
func (n *memNode) page(p int64) []byte {
	b := n.pages[p]
	if b == nil || !n.dirty[p] {
		nb := make([]byte, pageSize)
		copy(nb, b)
		b = nb
		n.pages[p] = b
		n.dirty[p] = true
	}
	return b
}

func (n *memNode) writeAt(b []byte, off int64) {
	for done := 0; done < len(b); {
		at := off + int64(done)
		p, o := at/pageSize, at%pageSize
		done += copy(n.page(p)[o:], b[done:])
	}
	n.size = max(n.size, off+int64(len(b)))
}

func (n *memNode) readAt(b []byte, off int64) int {
	if off >= n.size {
		return 0
	}
	b = b[:min(int64(len(b)), n.size-off)]
	for done := 0; done < len(b); {
		at := off + int64(done)
		p, o := at/pageSize, at%pageSize
		k := min(int64(len(b)-done), pageSize-o)
		if pg := n.pages[p]; pg != nil {
			copy(b[done:done+int(k)], pg[o:o+k])
		} else {
			clear(b[done : done+int(k)])
		}
		done += int(k)
	}
	return len(b)
}

// truncate sets the size; pages past it are dropped and the tail of the
// last page zeroed, so that growing the file again reads zeros.
func (n *memNode) truncate(size int64) {
	if size < n.size {
		last := (size + pageSize - 1) / pageSize // first page wholly past size
		for p := range n.pages {
			if p >= last {
				delete(n.pages, p)
				n.dirty[p] = true
			}
		}
		for p := range n.syncedPages {
			if p >= last {
				n.dirty[p] = true // dropped at the next Sync
			}
		}
		if o := size % pageSize; o != 0 && n.pages[size/pageSize] != nil {
			clear(n.page(size / pageSize)[o:])
		}
	}
	n.size = size
}

func (n *memNode) sync() {
	if n.dir {
		n.synced = maps.Clone(n.children)
		return
	}
	for p := range n.dirty {
		if b, ok := n.pages[p]; ok {
			n.syncedPages[p] = b
		} else {
			delete(n.syncedPages, p)
		}
	}
	clear(n.dirty)
	n.syncedSize = n.size
}

// memFile is a handle of a MemFS node.
type memFile struct {
	fs                  *MemFS
	n                   *memNode
	name                string
	read, write, append bool
	pos                 int64 // Read and Write; REQUIRES: fs.mu
	closed              bool  // REQUIRES: fs.mu
}

func (f *memFile) check(op string, needWrite, needRead, file bool) error {
	switch {
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case file && f.n.dir:
		return &os.PathError{Op: op, Path: f.name, Err: errIsDir}
	case needWrite && !f.write, needRead && !f.read:
		return &os.PathError{Op: op, Path: f.name, Err: errBadFD}
	}
	return nil
}

func (f *memFile) Read(b []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false, true, true); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	k := f.n.readAt(b, f.pos)
	f.pos += int64(k)
	if k == 0 {
		return 0, io.EOF
	}
	return k, nil
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false, true, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: errInvalid}
	}
	k := f.n.readAt(b, off)
	if k < len(b) {
		return k, io.EOF
	}
	return k, nil
}

func (f *memFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true, false, true); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = f.n.size
	}
	f.n.writeAt(b, f.pos)
	f.pos += int64(len(b))
	return len(b), nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true, false, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: errInvalid}
	}
	if f.append {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: errors.New("vfs: WriteAt on a file opened with O_APPEND")}
	}
	f.n.writeAt(b, off)
	return len(b), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false, false, false); err != nil {
		return nil, err
	}
	return f.n.info(filepath.Base(f.name)), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false, false); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

func (f *memFile) SyncData() error { return f.Sync() }

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true, false, true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: errInvalid}
	}
	f.n.truncate(size)
	return nil
}

func (f *memFile) Preallocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("fallocate", true, false, true); err != nil {
		return err
	}
	if size > f.n.size {
		f.n.size = size
	}
	return nil
}

type memInfo struct {
	name string
	size int64
	mode os.FileMode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }
