// Package leakcheck is the goroutine leak check of the benchmark packages'
// tests: their TestMain calls Main.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// Main runs the tests and fails them when a goroutine outlives them, but
// for the known leaks of a server stopped in this process.
func Main(m *testing.M) {
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
