package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FS is the set of file-system operations the node's durable files need.
// Paths are names in the style of the host (filepath); errors are
// *os.PathError or *os.LinkError wrapping the causes package os uses
// (os.ErrNotExist, os.ErrExist, syscall errnos), so errors.Is works the
// same on every implementation.
type FS interface {
	// Create creates the named file, or truncates it, for reading and
	// writing (os.Create).
	Create(name string) (File, error)
	// Open opens the named file or directory for reading.
	Open(name string) (File, error)
	// OpenFile opens the named file with flag (os.O_RDONLY, os.O_WRONLY or
	// os.O_RDWR, combined with os.O_CREATE, os.O_EXCL, os.O_TRUNC,
	// os.O_APPEND) and, when it creates the file, perm.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// OpenDir opens the named directory, to Sync it.
	OpenDir(name string) (File, error)
	// MkdirAll creates a directory and any missing parents; it does
	// nothing if the directory exists. See MkdirAllSync.
	MkdirAll(dir string, perm os.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything under it; a missing name is
	// not an error.
	RemoveAll(name string) error
	// Rename renames (moves) oldname to newname, replacing a file at
	// newname (never a directory: os.ErrExist).
	Rename(oldname, newname string) error
	// ReadDir returns the entries of a directory, sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// Stat describes the named file or directory.
	Stat(name string) (os.FileInfo, error)
}

// File is an open file or directory.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Stat describes the file.
	Stat() (os.FileInfo, error)
	// Sync makes the file's contents and metadata durable (fsync); on a
	// directory, it makes the directory's entries durable.
	Sync() error
	// SyncData makes the file's contents durable, with the metadata
	// needed to read them back (fdatasync where the system has it).
	SyncData() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Preallocate reserves the first size bytes of the file so that
	// writes below size do not change its size (fallocate where the
	// system has it, else a hole); it never shrinks the file.
	Preallocate(size int64) error
}

// SyncDir makes the entries of directory dir durable.
func SyncDir(fs FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAllSync creates directory dir and any missing parents, like
// MkdirAll, and syncs the parent of every directory it creates, so that
// the whole path survives a crash once it returns. It does nothing if dir
// exists.
func MkdirAllSync(fs FS, dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	fi, err := fs.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &os.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	// Create the missing ancestors first, top-down.
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAllSync(fs, parent, perm); err != nil {
			return err
		}
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	return SyncDir(fs, filepath.Dir(dir))
}
