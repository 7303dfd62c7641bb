package shard

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestGCCountersStartAtZero: a hosted shard exports its garbage-collection
// counters before any pass ran, so that a dashboard's rate() over a site
// whose leaders found nothing to collect reads 0 instead of no data.
func TestGCCountersStartAtZero(t *testing.T) {
	dir := t.TempDir()
	db, logs := testStores(t, dir)
	reg := prometheus.NewRegistry()
	_, trans := raft.NewInmemTransport("n1")
	g, err := Open(storage.ShardID{Keyspace: "default", Shard: 0}, testConfig(dir), Deps{
		Bootstrap: true, Generation: 1,
		DB: db, LogDB: logs, NodeID: "n1", Transport: trans,
		Clock:   causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) }),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"causeway_shard_gc_removed_versions_total": false, "causeway_shard_gc_passes_skipped_total": false}
	for _, f := range fams {
		if _, ok := want[f.GetName()]; !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "shard" && l.GetValue() == g.label && m.GetCounter().GetValue() == 0 {
					want[f.GetName()] = true
				}
			}
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s{shard=%q} is not exported at 0 before any pass", name, g.label)
		}
	}
}
