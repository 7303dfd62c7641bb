package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/causeway-db/causeway/internal/wal"
)

// diskFull returns err, the error a start or a running node stops with,
// saying what to do when a write found the data directory's file system
// full (ENOSPC): free space, then start kvd again. The damaged copies
// kept in the data directory (state.db.damaged, cluster.json.damaged and
// their timestamped siblings) hold their space until an operator deletes
// them, so they are named with their sizes. Any other error is returned
// as it is.
func diskFull(dataDir string, err error) error {
	if !isDiskFull(err) {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the file system of the data directory %s is full", dataDir)
	if free, _, serr := diskSpace(dataDir); serr == nil {
		fmt.Fprintf(&b, " (%s free", byteSize(free))
		if seg := uint64(wal.DefaultConfig("").SegmentBytes); free > 0 && free < seg {
			// Not empty, but too little for the next write: the
			// write-ahead log allocates each segment whole.
			fmt.Fprintf(&b, ", less than the %s the write-ahead log allocates for each segment", byteSize(seg))
		}
		b.WriteString(")")
	}
	b.WriteString(": free space on it, then start kvd again (nothing it acknowledged is lost)")
	switch kept := damagedCopies(dataDir); len(kept) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "; %s is a damaged copy that an earlier start moved aside and kept for checking the disk, and it keeps its space: delete it, or move it off this file system, once it is no longer needed", kept[0])
	default:
		fmt.Fprintf(&b, "; %s are damaged copies that earlier starts moved aside and kept for checking the disk, and they keep their space: delete them, or move them off this file system, once they are no longer needed", strings.Join(kept, ", "))
	}
	b.WriteString(`; see "Disk space" in docs/operations.md`)
	return fmt.Errorf("%w; %s", err, b.String())
}

// isDiskFull reports whether err is a write that found no space left on
// the device. bbolt formats some of its errors with %s (a failed resize
// of the database file), so the message counts too.
func isDiskFull(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), syscall.ENOSPC.Error()))
}

// damagedCopies returns the damaged files kept aside in dataDir, each as
// "name (size)", in directory order.
func damagedCopies(dataDir string) []string {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil
	}
	var kept []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, stateFile+damagedSuffix) && !strings.HasPrefix(name, clusterFile+damagedSuffix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		kept = append(kept, fmt.Sprintf("%s (%s)", filepath.Join(dataDir, name), byteSize(uint64(fi.Size()))))
	}
	return kept
}

// byteSize formats n bytes for a message: "512 B", "3.0 KiB", "1.5 GiB".
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// unusable returns err, the error a start stopped with, saying what to do
// when kvd may not use a file or directory of its data directory: one
// whose owner or mode keeps kvd's user out, or a directory where kvd
// keeps a file (or the other way round). Retrying cannot help, and
// nothing in the file was read, so this is no damage to repair. An error
// that already says what to do is returned as it is, and so is any other.
func unusable(dataDir string, err error) error {
	if err == nil || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR)) {
		return err
	}
	if msg := err.Error(); strings.Contains(msg, "docs/operations.md") || strings.Contains(msg, "check the owner and mode") {
		return err
	}
	return fmt.Errorf("%w; kvd cannot use a file or directory of its data directory %s: check that kvd's user owns every file and directory in it and may read and write them, and that none was replaced (a directory where kvd keeps a file, or a file where it keeps a directory); see \"Data directory\" in docs/operations.md", err, dataDir)
}
