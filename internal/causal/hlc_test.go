package causal

import "testing"

// TestFormatHLC: errors show an HLC as kvctl shows versions, WALL.LOGICAL,
// with the time it stands for, not as the packed integer.
func TestFormatHLC(t *testing.T) {
	got := FormatHLC(MakeHLC(1796638800123, 7))
	if want := "1796638800123.7 (2026-12-07T10:20:00.123Z)"; got != want {
		t.Fatalf("FormatHLC = %q, want %q", got, want)
	}
}
