package bench

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/causeway-db/causeway/internal/server"
)

// Embedded is a single-node kvd running inside the benchmark process, on a
// temporary data directory that Close removes.
type Embedded struct {
	Srv     *server.Server
	DataDir string
	Config  server.Config
}

// EmbeddedOptions configures StartEmbedded.
type EmbeddedOptions struct {
	// Parent is the directory under which the temporary data directory is
	// created; it decides which disk is measured. Empty means os.TempDir().
	Parent string
	// Shards overrides the number of shards when positive.
	Shards uint32
	// NoSync disables fsync (never for published numbers).
	NoSync bool
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Tweak, when set, adjusts the configuration last (tests use it for
	// fast raft timings).
	Tweak func(*server.Config)
	// ReadyTimeout bounds the wait for every shard to elect itself leader.
	// Zero means 30s.
	ReadyTimeout time.Duration
}

// StartEmbedded starts a server with the production defaults (fsync on),
// listening on loopback ports chosen by the kernel, and waits until every
// shard group is leader.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	parent := o.Parent
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "kvbench-data-*")
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NoSync = o.NoSync
	if o.Shards > 0 {
		cfg.Shards = o.Shards
	}
	if o.Tweak != nil {
		o.Tweak(&cfg)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv, err := server.New(cfg, logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := srv.Start(); err != nil { // Start stops what it started on error
		os.RemoveAll(dir)
		return nil, err
	}
	e := &Embedded{Srv: srv, DataDir: dir, Config: cfg}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if err := e.waitLeaders(timeout); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Embedded) waitLeaders(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leaders := 0
		groups := e.Srv.Groups()
		for _, g := range groups {
			if g.IsLeader() {
				leaders++
			}
		}
		if leaders == len(groups) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded server: only %d of %d shards elected a leader within %s", leaders, len(groups), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the client API address.
func (e *Embedded) Addr() string { return e.Srv.ClientAddr() }

// Close stops the server and removes its data directory.
func (e *Embedded) Close() error {
	e.Srv.Stop()
	return os.RemoveAll(e.DataDir)
}

// absDir returns dir made absolute, or dir itself when that fails.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
