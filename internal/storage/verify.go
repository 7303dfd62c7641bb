package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// verifyFile reads every page of the bbolt file at path that its trees
// reach (every bucket, every key, recursively), in a read-only
// transaction, before Open hands the file to bbolt for writing, and checks
// the checksum of every stored version (a shard's data bucket) on the way. bbolt
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
	case errors.Is(err, os.ErrPermission):
		// Not damage: the file is there, but this process may not read
		// it (the owner or mode changed).
		return fmt.Errorf("open %s: %w (check the owner and mode of the file and of the data directory)", path, err)
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
	err = b.View(func(tx *bolt.Tx) error {
		// Versions carry checksums in a state database of this build's
		// format; one of an earlier format is rebuilt (ErrStale).
		// The raft database seals its stable values from format 3 on.
		sums, stable := false, false
		if m := tx.Bucket(bucketMeta); m != nil {
			sums = bytes.Equal(m.Get(metaFormat), []byte(fmt.Sprint(derivedFormatVersion)))
			stable = bytes.Equal(m.Get(metaFormat), []byte(fmt.Sprint(formatVersion)))
			if v := m.Get(metaIncarnation); stable && v != nil {
				if _, err := unseal("site incarnation", metaIncarnation, v); err != nil {
					return err
				}
			}
		}
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			if stable && bytes.HasPrefix(name, []byte(prefixRaft)) {
				if sb := bk.Bucket(bucketStable); sb != nil {
					if err := sb.ForEach(func(k, v []byte) error {
						if v == nil {
							return nil
						}
						_, err := unseal("raft stable value", k, v)
						return err
					}); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
			}
			return walkBucket(bk, 0, name, sums)
		})
	})
	if errors.Is(err, ErrDamaged) || errors.Is(err, ErrBadEncoding) {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return err
}

// walkBucket visits every key of bk, at depth depth and named name, and of
// the buckets nested in it, and, if sums is set, checks the versions of a
// shard's data bucket (a bucket named data inside a top-level one) and
// the seals of its state, request and outbound records.
func walkBucket(bk *bolt.Bucket, depth int, name []byte, sums bool) error {
	data := sums && depth == 1 && bytes.Equal(name, bucketData)
	what, sealed := sealedBucket(name)
	sealed = sealed && sums && depth == 1
	c := bk.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if nested := bk.Bucket(k); nested != nil {
				if err := walkBucket(nested, depth+1, k, sums); err != nil {
					return err
				}
			}
			continue
		}
		var err error
		switch {
		case data:
			_, err = checkValue(k, v)
		case sealed:
			_, err = unseal(what, k, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
