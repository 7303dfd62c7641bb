package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/server"
)

// fastRaft gives the embedded server test timings so it elects quickly.
func fastRaft(cfg *server.Config) {
	cfg.Shards = 4
	cfg.Shard.HeartbeatTimeout = 100 * time.Millisecond
	cfg.Shard.ElectionTimeout = 100 * time.Millisecond
	cfg.Shard.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.Shard.CommitTimeout = 5 * time.Millisecond
	cfg.Shard.GCInterval = 0
	cfg.ShutdownGrace = 2 * time.Second
}

func TestRunEndToEnd(t *testing.T) {
	c := DefaultConfig()
	c.DataDirParent = t.TempDir()
	c.Clients = []int{2}
	c.Duration = 300 * time.Millisecond
	c.Warmup = 0
	c.Keys = 50
	c.ValueSize = 64
	c.FsyncSamples = 5
	c.ServerTweak = fastRaft
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("got %d results, want put and get", len(rep.Results))
	}
	for i, want := range []string{"put", "get"} {
		r := rep.Results[i]
		if r.Op != want || r.Clients != 2 {
			t.Errorf("result %d is %s/%d, want %s/2", i, r.Op, r.Clients, want)
		}
		if r.Ops <= 0 || r.Throughput <= 0 {
			t.Errorf("%s: ops = %d, ops/s = %v, want > 0", r.Op, r.Ops, r.Throughput)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors: %s", r.Op, r.Errors, r.ErrorSummary())
		}
		if r.Latency.Count != r.Ops {
			t.Errorf("%s: histogram holds %d samples for %d ops", r.Op, r.Latency.Count, r.Ops)
		}
		if r.Latency.P50Ms <= 0 || r.Latency.P99Ms < r.Latency.P50Ms {
			t.Errorf("%s: implausible latency %+v", r.Op, r.Latency)
		}
	}
	if s := rep.Results[0].Server; s == nil || s.Commits == 0 || s.MeanBatch < 1 {
		t.Errorf("put phase server stats = %+v, want storage commits", s)
	}
	if rep.Results[0].CPU.Client <= 0 {
		t.Errorf("put phase cpu = %+v, want process CPU > 0", rep.Results[0].CPU)
	}
	if rep.Load == nil || rep.Load.Loaded != 50 || rep.Load.Latency.Count != 50 {
		t.Errorf("load = %+v, want 50 records", rep.Load)
	}
	if !rep.Fsync || rep.DiskSync == nil || rep.DiskSync.Samples < 1 {
		t.Errorf("fsync %v, disk sync %+v", rep.Fsync, rep.DiskSync)
	}

	md := rep.Markdown()
	for _, want := range []string{"| op | clients | ops/s |", "| put | 2 |", "| get (CAUSAL) | 2 |", syncMethod} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 2 || back.Results[0].Ops != rep.Results[0].Ops {
		t.Errorf("JSON round trip lost results: %s", js)
	}
}

// siteRaft gives a multi-node embedded site the timings of
// internal/clustertest: fast, yet tolerant of a loaded machine and -race.
func siteRaft(cfg *server.Config) {
	cfg.Shards = 4
	cfg.Shard.HeartbeatTimeout = 200 * time.Millisecond
	cfg.Shard.ElectionTimeout = 200 * time.Millisecond
	cfg.Shard.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.Shard.CommitTimeout = 5 * time.Millisecond
	cfg.Shard.GCInterval = 0
	cfg.DeadGrace = 2 * time.Second
	cfg.ShutdownGrace = 2 * time.Second
}

// A three-node site in one process: puts, CAUSAL gets and STRONG gets all
// succeed with clients spread over every node.
func TestRunThreeNodes(t *testing.T) {
	c := DefaultConfig()
	c.DataDirParent = t.TempDir()
	c.Nodes = 3
	c.Clients = []int{2}
	c.Ops = []string{"put", "get", "sget"}
	c.Duration = 300 * time.Millisecond
	c.Warmup = 0
	c.Keys = 50
	c.ValueSize = 64
	c.FsyncSamples = 0
	c.ServerTweak = siteRaft
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Nodes != 3 || !strings.Contains(rep.Target, "3-node site") || rep.Leaders == "" {
		t.Errorf("nodes %d, target %q, leaders %q", rep.Nodes, rep.Target, rep.Leaders)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("got %d results, want put, get and sget", len(rep.Results))
	}
	for i, want := range []struct{ op, cons string }{{"put", ""}, {"get", "CAUSAL"}, {"sget", "STRONG"}} {
		r := rep.Results[i]
		if r.Op != want.op || r.Consistency != want.cons || r.Clients != 2 {
			t.Errorf("result %d is %s/%s/%d, want %s/%s/2", i, r.Op, r.Consistency, r.Clients, want.op, want.cons)
		}
		if r.Ops <= 0 {
			t.Errorf("%s: ops = %d, want > 0", r.Op, r.Ops)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors: %s", r.Op, r.Errors, r.ErrorSummary())
		}
		if r.Conns != 3 {
			t.Errorf("%s: %d connections, want one per node", r.Op, r.Conns)
		}
	}
	// Commits are summed over the nodes: every replica commits each put.
	if s := rep.Results[0].Server; s == nil || s.Commits == 0 || len(s.DBs) != 9 {
		t.Errorf("put phase server stats = %+v, want storage commits of 3 nodes × (raft.db, state.db, wal)", s)
	} else if s.ForwardsPerOp <= 0 {
		t.Errorf("put phase: %.2f forwards per request, want > 0 (client 1 is on a follower)", s.ForwardsPerOp)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	for _, want := range []string{"| get (CAUSAL) | 2 |", "| sget (STRONG) | 2 |", "forwards/request", "shard leaders", "| put | 2 | n3 | raft |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestAppendKey(t *testing.T) {
	w, err := NewKVWorkload("p/", 10, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(w.AppendKey(nil, 42)); got != "p/0000000042" {
		t.Errorf("key = %q", got)
	}
}
