package clustertest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
//
// One known exception: memberlist's TCP fallback probe runs on a goroutine
// of its own (Memberlist.probeNode) that Shutdown does not wait for; it
// ends at the probe's deadline (about a second with the local profile),
// which can be after the last test returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).sendPingAndWaitForAck"))
}
