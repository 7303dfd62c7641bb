package vfs

import "os"

// Default is the operating system's file system.
var Default FS = osFS{}

// OrDefault returns fs, or Default when fs is nil.
func OrDefault(fs FS) FS {
	if fs == nil {
		return Default
	}
	return fs
}

type osFS struct{}

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (File, error) { return wrap(os.Create(name)) }
func (osFS) Open(name string) (File, error)   { return wrap(os.Open(name)) }
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return wrap(os.OpenFile(name, flag, perm))
}
func (osFS) OpenDir(name string) (File, error)           { return wrap(os.Open(name)) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

// osFile is an *os.File with SyncData and Preallocate.
type osFile struct{ *os.File }

func (f osFile) SyncData() error              { return datasync(f.File) }
func (f osFile) Preallocate(size int64) error { return preallocate(f.File, size) }

// extend grows f to size bytes with a hole; it never shrinks f.
func extend(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}
