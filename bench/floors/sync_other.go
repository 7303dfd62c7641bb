//go:build !linux

package floors

import "os"

const syncMethod = "fsync"

func datasync(f *os.File) error { return f.Sync() }
