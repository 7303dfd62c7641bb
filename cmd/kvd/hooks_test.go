package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestHooksInBinary: the test hooks (functions named ...ForTest,
// such as storage.CorruptForTest, which damages a replica's state) are
// referred to only by tests (the test-hooks rule of internal/lint), so the
// linker leaves them out of kvd: no request, flag or file can reach them.
func TestNoTestHooksInBinary(t *testing.T) {
	out, err := exec.Command("go", "tool", "nm", kvdBinary).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, out)
	}
	syms := strings.Split(string(out), "\n")
	found := 0
	for _, s := range syms {
		if strings.Contains(s, "causeway/internal/") {
			found++
		}
		if strings.Contains(s, "ForTest") && strings.Contains(s, "causeway") {
			t.Errorf("kvd holds a test hook: %s", strings.TrimSpace(s))
		}
	}
	if found == 0 {
		t.Fatalf("no symbol of internal/ in %d symbols: is the binary stripped?", len(syms))
	}
}
