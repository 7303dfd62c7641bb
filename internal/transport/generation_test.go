package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// newerLog records the generations a group transport reported newer.
type newerLog struct {
	mu    sync.Mutex
	seen  []uint64
	adopt bool
}

func (l *newerLog) fn(gen uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, gen)
	return l.adopt
}

func (l *newerLog) saw(gen uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.seen {
		if g == gen {
			return nil
		}
	}
	return fmt.Errorf("newer generations reported: %v, not %d", l.seen, gen)
}

// TestGenerationRefusal: a request of another generation than the local
// replica's is refused before it reaches raft, with FailedPrecondition and
// the refusing replica's generation; a newer one is reported to the owner,
// which may take it.
func TestGenerationRefusal(t *testing.T) {
	node := newTestNode(t, "a", nil)
	tr, err := node.net.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	gt := tr.(*groupTransport)
	gt.SetGeneration(2)
	var owner newerLog
	gt.OnNewerGeneration(owner.fn)
	c := rawClient(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	withGen := func(gen uint64) *peerv1.RaftHeader { h := hdr(); h.Generation = gen; return h }

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"append, older", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Header = withGen(1) }))
			return err
		}},
		{"vote, older", func() error {
			_, err := c.RequestVote(ctx, &peerv1.RequestVoteRequest{Group: "g", Header: withGen(0), Term: 1})
			return err
		}},
		{"pre-vote, newer", func() error {
			_, err := c.RequestPreVote(ctx, &peerv1.RequestPreVoteRequest{Group: "g", Header: withGen(3), Term: 1})
			return err
		}},
		{"timeout-now, older", func() error {
			_, err := c.TimeoutNow(ctx, &peerv1.TimeoutNowRequest{Group: "g", Header: withGen(1)})
			return err
		}},
		{"pipeline, older", func() error {
			s, err := c.AppendEntriesPipeline(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Header = withGen(0) })); err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"snapshot, older", func() error {
			s, err := c.InstallSnapshot(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(reqChunk(snapReq("g", func(m *peerv1.InstallSnapshotRequest) { m.Header = withGen(1) }))); err != nil {
				return err
			}
			_, err = s.CloseAndRecv()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("err = %v, want FailedPrecondition", err)
			}
			if gen, ok := refusingGeneration(err); !ok || gen != 2 {
				t.Fatalf("refusal carries generation %d (%v), want 2", gen, ok)
			}
			if e := fromStatus("op", "target", err); !errors.Is(e, ErrGeneration) {
				t.Fatalf("fromStatus = %v, want ErrGeneration", e)
			}
		})
	}
	if err := owner.saw(3); err != nil {
		t.Fatal(err)
	}
	if gt.Generation() != 2 {
		t.Fatalf("generation %d after refusing a newer one, want 2", gt.Generation())
	}

	// An owner that takes the newer generation: the request is served (it
	// reaches raft, absent here, so it waits for its deadline).
	owner.adopt = true
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	_, err = c.RequestVote(short, &peerv1.RequestVoteRequest{Group: "g", Header: withGen(5), Term: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("vote of a taken generation: %v, want DeadlineExceeded (served)", err)
	}
	if gt.Generation() != 5 {
		t.Fatalf("generation %d, want 5 taken", gt.Generation())
	}
}

// TestGenerationsApart: of a two-voter raft group, the replica of a newer
// generation refuses the other's raft traffic, and the other learns of the
// newer generation from the refusals (whether it sent them or was sent
// them); with equal generations they work together again.
func TestGenerationsApart(t *testing.T) {
	a, b := newTestNode(t, "a", nil), newTestNode(t, "b", nil)
	peers := servers(a, b)
	ra, _ := a.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, peers)
	rb, _ := b.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, peers)
	applyN(t, []*raft.Raft{ra, rb}, 1, 10)

	ga, err := a.net.group("g")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := b.net.group("g")
	if err != nil {
		t.Fatal(err)
	}
	var ownerB newerLog
	gb.OnNewerGeneration(ownerB.fn)
	ga.SetGeneration(1)
	poll.Until(t, 30*time.Second, "b learns of generation 1", func() error { return ownerB.saw(1) })
	gb.SetGeneration(1)
	applyN(t, []*raft.Raft{ra, rb}, 11, 5)
}
