//go:build !(linux || darwin)

package server

import "errors"

func diskSpace(string) (free, total uint64, err error) {
	return 0, 0, errors.New("disk space is not measured on this platform")
}
