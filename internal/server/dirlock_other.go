//go:build !unix

package server

import "os"

// lockDataDir does nothing where flock is not available; the databases'
// own locks still refuse a second process, later.
func lockDataDir(dir string) (*os.File, error) { return nil, nil }
