package floors

import (
	"os"
	"syscall"
)

// SyncMethod names the call that forces a write to disk on this platform.
const SyncMethod = "fdatasync"

func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
