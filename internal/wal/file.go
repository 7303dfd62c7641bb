package wal

import "os"

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
