//go:build unix

package server

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive lock on the data directory itself (no
// file is added to it), held until the returned file is closed. A second
// kvd on the same directory is refused at once, before it starts gossip
// under the node id of the one that runs there or opens anything.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			return nil, fmt.Errorf("%w: %s", ErrDataDirInUse, dir)
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			// A file system without flock (some network file systems):
			// the databases' own locks still refuse a second process.
			return nil, nil
		}
		return nil, fmt.Errorf("data dir: lock %s: %w", dir, err)
	}
	return f, nil
}
