package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestProposalsEndWhenTheGroupCloses: every proposal in flight when a
// replica closes returns, even one made without a deadline. Raft leaves
// some futures unanswered at shutdown (committed entries still queued for
// the state machine, and with BatchApplyCh proposals still queued for the
// leader); Group.wait stops waiting on them once raft is down.
func TestProposalsEndWhenTheGroupCloses(t *testing.T) {
	dir := t.TempDir()
	g := openAlone(t, dir, testConfig(dir))
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))

	const writers = 32
	var (
		wg       sync.WaitGroup
		returned atomic.Int64
		applied  atomic.Int64
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer returned.Add(1)
			for i := 0; ; i++ {
				cmd := &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte{byte(w), byte(i)}, Value: []byte("v"), Site: "s1"}}}
				if _, err := g.Propose(context.Background(), cmd); err != nil {
					return
				}
				applied.Add(1)
			}
		}()
	}
	poll.Until(t, 10*time.Second, "writes are applied", poll.True(func() bool { return applied.Load() > 200 }))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "every proposal returns after Close", func() error {
		if n := returned.Load(); n != writers {
			return fmt.Errorf("%d of %d writers returned", n, writers)
		}
		return nil
	})
	wg.Wait()
}
