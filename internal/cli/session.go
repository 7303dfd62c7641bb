package cli

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/causeway-db/causeway/internal/causal"
)

// The session file holds the session token in standard base64 followed by
// a newline. An empty or missing file is an empty session.

// loadSession reads the session token stored at path. A missing file is an
// empty session; a corrupt one is an ExitUsage error telling the user to
// delete it, and so is a directory, or a path through a file.
func loadSession(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			return nil, withCode(ExitUsage, fmt.Errorf("session file %s is a directory; name a file with --session-file PATH (or %s), or run without a session with --session-file none", path, EnvSessionFile))
		}
		if errors.Is(err, syscall.ENOTDIR) {
			// A file where the path needs a directory: the file could
			// never be written either.
			return nil, withCode(ExitUsage, fmt.Errorf("session file %s: a part of its path is a file, not a directory; name another file with --session-file PATH (or %s), or run without a session with --session-file none", path, EnvSessionFile))
		}
		return nil, fmt.Errorf("session file: %w; make it readable, name another file with --session-file PATH, or run without a session with --session-file none", err)
	}
	tok, err := decodeSessionFile(data)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("session file %s is corrupt (%v); delete it to start a new session", path, err))
	}
	return tok, nil
}

func decodeSessionFile(data []byte) ([]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	tok, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, errors.New("not base64")
	}
	if _, err := causal.DecodeSession(tok); err != nil {
		return nil, err
	}
	return tok, nil
}

// saveSession stores tok at path, merged with the session the file holds
// now (another kvctl may have saved since this one loaded) unless replace
// is set or that session is of another cluster. It creates the directory
// (0700) and replaces the file (0600) atomically.
func saveSession(path string, tok []byte, replace bool) error {
	if len(tok) == 0 {
		return nil
	}
	s, err := causal.DecodeSession(tok)
	if err != nil {
		return err
	}
	if data, err := os.ReadFile(path); err == nil && !replace {
		if cur, err := decodeSessionFile(data); err == nil {
			if o, err := causal.DecodeSession(cur); err == nil && (o.Cluster == 0 || s.Cluster == 0 || o.Cluster == s.Cluster) {
				// The new token names the site that served the session
				// last (a site it moves to waits for what it saw there):
				// the file's older session must not take that back.
				site := s.Site
				s.Merge(o)
				if site != "" {
					s.Site = site
				}
			}
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	content := base64.StdEncoding.AppendEncode(nil, s.Encode())
	content = append(content, '\n')
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
