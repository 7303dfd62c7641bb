//go:build !linux

package floors

import "os"

// SyncMethod names the call that forces a write to disk on this platform.
const SyncMethod = "fsync"

func datasync(f *os.File) error { return f.Sync() }
