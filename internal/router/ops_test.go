package router

import (
	"errors"
	"fmt"
	"testing"

	"github.com/causeway-db/causeway/internal/fsm"
)

// TestIsCondition: only the compare-and-swap outcomes are failed
// conditions; any other apply error (a storage failure) is not.
func TestIsCondition(t *testing.T) {
	for _, err := range []error{fsm.ErrVersionMismatch, fsm.ErrKeyNotFound, fsm.ErrKeyExists, fmt.Errorf("x: %w", fsm.ErrKeyExists)} {
		if !isCondition(err) {
			t.Errorf("%v is a condition", err)
		}
	}
	for _, err := range []error{errors.New("storage: the state database failed: commit: no space left on device"), fsm.ErrBadReplicate} {
		if isCondition(err) {
			t.Errorf("%v is not a condition", err)
		}
	}
}
