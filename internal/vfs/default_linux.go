package vfs

import (
	"errors"
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// preallocate reserves the first size bytes of f (never shrinking it), so
// that appends do not change the file size (and fdatasync has no size to
// journal). Where the file system cannot, the file is extended with a hole
// instead.
func preallocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return extend(f, size)
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
