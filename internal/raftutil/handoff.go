package raftutil

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
)

// ErrNoOtherVoter is HandOff's error for a group whose configuration
// counts no voter but this replica: there is no one to hand off to.
var ErrNoOtherVoter = errors.New("no other voter to hand the leadership to")

// ErrNotLeading is HandOff's error for a replica that does not lead.
var ErrNotLeading = errors.New("not the leader")

// HandOff transfers r's leadership to its most up-to-date follower
// (raft's LeadershipTransfer, which sends it TimeoutNow) and waits until
// the transfer completed or ctx ended. A node that stops cleanly calls it
// for each group it leads, so that the group has a leader again within a
// round trip rather than after its followers' heartbeat timeout.
func HandOff(ctx context.Context, r *raft.Raft) error {
	if r.State() != raft.Leader {
		return ErrNotLeading
	}
	if !hasOtherVoter(r) {
		return ErrNoOtherVoter
	}
	f := r.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hasOtherVoter reports whether r's configuration counts a voter other
// than r itself.
func hasOtherVoter(r *raft.Raft) bool {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	_, self := r.LeaderWithID()
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != self {
			return true
		}
	}
	return false
}
