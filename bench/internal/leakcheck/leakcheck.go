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
		// A probe of a member that does not answer (a node stopped
		// first) runs on memberlist's scheduler goroutine, which waits in
		// Memberlist.probeNode for the probe's acks, and its TCP fallback
		// on a goroutine of its own (sendPingAndWaitForAck); Shutdown
		// waits for neither. Both end at the probe's deadline, which can
		// be after the last test returned.
		goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).sendPingAndWaitForAck"),
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
		// A future raft abandoned at shutdown (see shard's Group.wait).
		goleak.IgnoreAnyFunction("github.com/causeway-db/causeway/internal/shard.(*Group).wait.func1"),
		// hashicorp/raft leaks a leadership transfer that is under way
		// when the node shuts down: leadershipTransfer blocks sending to
		// the stopped replication goroutine, and the leader loop's helper
		// waits for it. Both hold nothing but the stopped raft node.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leadershipTransfer"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leaderLoop.func2"))
}
