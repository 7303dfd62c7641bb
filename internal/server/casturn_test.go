package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/shard"
)

// TestCASTurnSpendsOneEntry: of many compare-and-swaps of one key that
// all expect its current version, exactly one succeeds, and the others
// conflict with the winner's version. They take turns on the leader
// (router.CASTurn, guard cas-turn), so the losers are answered without a
// log entry: the key's shard grows by about one entry, not one per swap.
// With the guard off every swap is proposed and decided in the log, and
// the test fails.
func TestCASTurnSpendsOneEntry(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Shard.CloseInterval = 0 // no cadence Closes in the count
	n := start(t, cfg)
	key := []byte("hot")
	// Whether the swaps meet in the log with the guard off depends on how
	// the goroutines are scheduled: a few rounds make the bite sure.
	for round := range 3 {
		casTurnRound(t, n, key, round)
	}
}

// casTurnRound runs one round of TestCASTurnSpendsOneEntry.
func casTurnRound(t *testing.T, n *node, key []byte, round int) {
	t.Helper()
	put, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Key: key, Value: fmt.Appendf(nil, "r%d", round)})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := n.srv.Router().Shard("default", key)
	if err != nil {
		t.Fatal(err)
	}
	var g *shard.Group
	for _, x := range n.srv.Groups() {
		if uint32(x.ID().Shard) == sh.ID && x.ID().Keyspace == "default" {
			g = x
		}
	}
	if g == nil {
		t.Fatalf("no group for shard %d", sh.ID)
	}
	before := g.Raft().LastIndex()

	const swaps = 48
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []*kvv1.Version
	var lost int
	errs := make(chan error, swaps)
	start := make(chan struct{})
	for i := range swaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := n.kv.CompareAndSwap(context.Background(), &kvv1.CompareAndSwapRequest{
				Key: key, Value: fmt.Appendf(nil, "v%d", i+1),
				Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: put.Version},
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, resp.Version)
			case status.Code(err) == codes.FailedPrecondition:
				lost++
			default:
				errs <- fmt.Errorf("swap %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(won) != 1 || lost != swaps-1 {
		t.Fatalf("%d swaps won and %d lost, want 1 and %d", len(won), lost, swaps-1)
	}
	added := g.Raft().LastIndex() - before
	t.Logf("round %d: %d swaps expecting one version: one won, %d conflicted, %d log entries", round, swaps, lost, added)
	if added > 2 {
		t.Fatalf("%d swaps expecting one version added %d log entries: the losers were decided in the log", swaps, added)
	}
	got, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Key: key, Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version.Hlc != won[0].Hlc {
		t.Fatalf("the key is at %v, the winner wrote %v", got.Version, won[0])
	}
}
