package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A future raft abandoned at shutdown (see shard's Group.wait).
		goleak.IgnoreAnyFunction("github.com/causeway-db/causeway/internal/shard.(*Group).wait.func1"),
		// hashicorp/raft leaks a leadership transfer that is under way
		// when the node shuts down: leadershipTransfer blocks sending to
		// the stopped replication goroutine, and the leader loop's helper
		// waits for it. Both hold nothing but the stopped raft node.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leadershipTransfer"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leaderLoop.func2"))
}
