//go:build !linux

package bench

import "os"

const syncMethod = "fsync"

func datasync(f *os.File) error { return f.Sync() }
