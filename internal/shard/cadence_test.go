package shard

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestWritesKeepTheCloseCadence: while reads keep a leader's close
// cadence going (AdvanceClosed), an idle shard proposes a Close every
// CloseInterval, and a shard that takes writes of this site more often
// than that proposes none: each write moves the shard's newest HLC on as
// a Close would, and CloseCadence still tells followers a cadence runs.
// The interval is long (half a second) against writes every 25 ms, so
// that a slow machine does not leave a whole interval without a write.
func TestWritesKeepTheCloseCadence(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.CloseInterval, cfg.CloseDemand = 500*time.Millisecond, time.Hour
	db, logs := testStores(t, dir)
	m := NewMetrics(prometheus.NewRegistry())
	_, trans := raft.NewInmemTransport("n1")
	clock := causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) })
	g, err := Open(storage.ShardID{Keyspace: "default", Shard: 0}, cfg, Deps{
		Bootstrap: true, Generation: 1,
		DB: db, LogDB: logs, NodeID: "n1", Transport: trans, Clock: clock,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))
	closes := func() float64 { return testutil.ToFloat64(m.closes.WithLabelValues("ok")) }

	g.AdvanceClosed(clock.Now())
	poll.Until(t, 30*time.Second, "three Closes of the cadence on the idle shard", poll.True(func() bool { return closes() >= 3 }))

	ctx := context.Background()
	before := closes()
	start := time.Now()
	for i := 0; time.Since(start) < 8*cfg.CloseInterval; i++ {
		w := &peerv1.Write{Key: []byte{byte(i)}, Value: []byte("v"), Site: "s1", Hlc: clock.Now()}
		if _, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Write{Write: w}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cfg.CloseInterval / 20)
	}
	// One Close may have been under way as the writes began.
	if n := closes() - before; n > 1 {
		t.Errorf("%v Closes proposed in %v of writes every %v (interval %v): the writes did not keep the cadence", n, time.Since(start).Round(time.Millisecond), cfg.CloseInterval/20, cfg.CloseInterval)
	}
	if c := g.CloseCadence(); c != cfg.CloseInterval {
		t.Errorf("CloseCadence %v during the writes, want %v: followers would hand reads to the leader", c, cfg.CloseInterval)
	}
}
