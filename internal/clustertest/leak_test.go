package clustertest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-db/causeway/internal/lockorder"
)

// TestMain fails the package's tests when a goroutine outlives them, and
// turns on the lock-order checks of internal/lockorder (geo's locks).
//
// One known exception: a probe of a member that does not answer (a node a
// test killed) runs on memberlist's scheduler goroutine, which waits in
// Memberlist.probeNode for the probe's acks, and its TCP fallback on a
// goroutine of its own (sendPingAndWaitForAck); Shutdown waits for
// neither. Both end at the probe's deadline (about a second with the local
// profile), which can be after the last test returned.
func TestMain(m *testing.M) {
	lockorder.Enable()
	goleak.VerifyTestMain(m,
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
