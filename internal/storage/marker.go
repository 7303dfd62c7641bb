package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// markerSuffix names the open-marker file of a Derived database.
const markerSuffix = ".open"

// MarkerPath returns the open-marker file of the database at path.
func MarkerPath(path string) string { return path + markerSuffix }

// checkMarker refuses a Derived database left open by an earlier boot.
func checkMarker(path, bootID string) error {
	b, err := os.ReadFile(MarkerPath(path))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("storage: read open marker: %w", err)
	}
	if bootID == "" || !bytes.Equal(bytes.TrimSpace(b), []byte(bootID)) {
		return fmt.Errorf("%w: %s (opened during boot %q, now %q)", ErrUnclean, path, bytes.TrimSpace(b), bootID)
	}
	return nil
}

// writeMarker durably records that the database is open during bootID.
func writeMarker(path, bootID string) error {
	tmp := MarkerPath(path) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("storage: write open marker: %w", err)
	}
	_, err = f.WriteString(bootID + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, MarkerPath(path))
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("storage: write open marker: %w", err)
	}
	return nil
}

// removeMarker durably records a clean close.
func removeMarker(path string) error {
	if err := os.Remove(MarkerPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage: remove open marker: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// BootID returns the identity of the running boot of the machine, or ""
// when the platform does not expose one.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
