package core

import (
	"testing"

	"github.com/causeway-db/causeway/bench/internal/leakcheck"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) { leakcheck.Main(m) }
