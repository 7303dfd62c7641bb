package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
	"github.com/causeway-db/causeway/internal/wal"
)

// TestFailedLogStopsTheReplica: the node's write-ahead log fails while
// clients write (every write to it fails: a full disk), and refuses every
// write from then on (wal.ErrFailed). The replica stops at once instead of
// leaving raft to step down and stand again: a proposal in flight ends
// (leadership lost: its outcome is unknown to raft), and every proposal
// after it fails at once with ErrStopped and the log's error; the node is
// told once (Deps.OnFatal), and the replica closes (raft shuts down).
func TestFailedLogStopsTheReplica(t *testing.T) {
	dir := t.TempDir()
	tog := errorfs.NewToggle(errorfs.Writes)
	db, logs := testStoresOn(t, dir, errorfs.Wrap(vfs.Default, tog))
	fatal := make(chan error, 10)
	_, trans := raft.NewInmemTransport("n1")
	g, err := Open(storage.ShardID{Keyspace: "default", Shard: 0}, testConfig(dir), Deps{
		Bootstrap: true, Generation: 1,
		DB: db, LogDB: logs, NodeID: "n1", Transport: trans,
		Clock:   causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) }),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnFatal: func(err error) { fatal <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))
	write := func(w, i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: fmt.Appendf(nil, "w%d-%d", w, i), Value: []byte("v"), Site: "s1"}}}
		_, err := g.Propose(ctx, cmd)
		return err
	}
	for i := range 20 {
		if err := write(0, i); err != nil {
			t.Fatal(err)
		}
	}

	tog.On()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := write(w, i)
				switch {
				case err == nil:
					continue // stored before the failure
				case errors.Is(err, ErrLeadershipLost):
					continue // in flight at the failure
				}
				errs <- err
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrStopped) || !errors.Is(err, wal.ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("a proposal after the failed write: %v; want ErrStopped with the log's failure", err)
		}
	}
	if err := g.Failure(); !errors.Is(err, ErrStopped) || !errors.Is(err, wal.ErrFailed) {
		t.Errorf("Failure() = %v", err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, wal.ErrFailed) {
			t.Errorf("OnFatal(%v); want the log's failure", err)
		}
	default:
		t.Error("OnFatal was not called")
	}
	// (Not raft's State: a step down under way when raft shuts down can
	// still set it to Follower.)
	select {
	case <-g.down:
	case <-time.After(10 * time.Second):
		t.Fatal("the replica did not close within 10 s of its failure")
	}
	if err := write(0, 1000); !errors.Is(err, wal.ErrFailed) {
		t.Errorf("a proposal once the replica stopped: %v", err)
	}
	if len(fatal) != 0 {
		t.Errorf("OnFatal was called %d more times", len(fatal))
	}
}
