package storage

import (
	"errors"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// verifyFile reads every page of the bbolt file at path that its trees
// reach (every bucket, every key, recursively), in a read-only
// transaction, before Open hands the file to bbolt for writing. bbolt
// checks a page's header where it reads it and panics on a mismatch; on
// a read-write open of a file written without a freelist it walks every
// page from a goroutine of its own, where such a panic would end the
// process with a stack trace instead of an error. Here the same pages are
// read on the caller's goroutine, where a panic, or a fault on a page
// beyond the file, becomes ErrCorrupt.
func verifyFile(path string, opts bolt.Options) (err error) {
	opts.ReadOnly = true
	opts.NoFreelistSync = true
	b, err := bolt.Open(path, 0o400, &opts)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w: %s", ErrLocked, path)
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	defer func() {
		if cerr := b.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, path, cerr)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()
	return b.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			walkBucket(bk)
			return nil
		})
	})
}

// walkBucket visits every key of bk and of the buckets nested in it.
func walkBucket(bk *bolt.Bucket) {
	c := bk.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if nested := bk.Bucket(k); nested != nil {
				walkBucket(nested)
			}
		}
	}
}
