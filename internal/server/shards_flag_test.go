package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestShardsFlagOfAnExistingClusterWarns: a node restarted with a --shards
// other than the default keyspace's count, fixed when the cluster was
// created, says that the value is ignored; the keyspace keeps its count.
func TestShardsFlagOfAnExistingClusterWarns(t *testing.T) {
	dir := t.TempDir()
	n := start(t, testConfig(dir)) // creates the cluster with 8 shards
	n.srv.Stop()

	var out lockedBuffer
	cfg := testConfig(dir)
	cfg.Shards, cfg.ShardsGiven = 4, true
	n2 := startLogged(t, cfg, slog.New(slog.NewTextHandler(&out, nil)))
	waitFor(t, 20*time.Second, "a warning that --shards 4 is ignored", func() bool {
		return strings.Contains(out.String(), "--shards 4 is ignored: the cluster's default keyspace has 8 shards")
	})
	if got := n2.srv.catalog.Keyspaces()["default"]; got != 8 {
		t.Fatalf("the default keyspace has %d shards after the restart, want 8", got)
	}
}
