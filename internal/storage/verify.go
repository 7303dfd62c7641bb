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
		var prev []byte
		if err := tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			// The top-level buckets are checked as walkBucket checks
			// keys: in order, and found by a lookup.
			if prev != nil && bytes.Compare(prev, name) >= 0 {
				return fmt.Errorf("%w: bucket %q follows bucket %q", errTree, name, prev)
			}
			if tx.Bucket(name) == nil {
				return fmt.Errorf("%w: a lookup of bucket %q finds nothing", errTree, name)
			}
			prev = append(prev[:0], name...)
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
		}); err != nil {
			return err
		}
		// The read-write open rebuilds the free list from the pages the
		// trees reference, and panics where a page is referenced twice
		// or out of bounds (checkPageRefs).
		return checkPageRefs(path, b.Info().PageSize, uint64(tx.ID()))
	})
	if errors.Is(err, ErrDamaged) || errors.Is(err, ErrBadEncoding) || errors.Is(err, errTree) || errors.Is(err, errPages) {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return err
}

// errTree: a bucket's pages do not index its keys in order.
var errTree = errors.New("the pages of a bucket do not index its keys in order")

// walkBucket visits every key of bk, at depth depth and named name, and of
// the buckets nested in it, and, if sums is set, checks the versions of a
// shard's data bucket (a bucket named data inside a top-level one) and
// the seals of its state, request and outbound records.
func walkBucket(bk *bolt.Bucket, depth int, name []byte, sums bool) error {
	data := sums && depth == 1 && bytes.Equal(name, bucketData)
	what, sealed := sealedBucket(name)
	sealed = sealed && sums && depth == 1
	c, seek := bk.Cursor(), bk.Cursor()
	var prev []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		// A branch page whose keys changed still lists every page, so
		// the walk reads every key, but a lookup goes down the wrong
		// branch and misses some: such a key would read as absent, and
		// the read-write open's own walk of bbolt's (freepages) panics on
		// it and crashes the process from a goroutine of its own. Every
		// key must follow the one before and be found by a lookup.
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return fmt.Errorf("%w: bucket %q: key %x follows key %x", errTree, name, k, prev)
		}
		if sk, _ := seek.Seek(k); !bytes.Equal(sk, k) {
			found := "nothing"
			if sk != nil {
				found = fmt.Sprintf("key %x", sk)
			}
			return fmt.Errorf("%w: bucket %q: a lookup of key %x finds %s", errTree, name, k, found)
		}
		prev = append(prev[:0], k...)
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
