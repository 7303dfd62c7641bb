package ycsbrun

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A future raft abandoned at shutdown (see shard's Group.wait).
		goleak.IgnoreAnyFunction("github.com/causeway-db/causeway/internal/shard.(*Group).wait.func1"))
}
