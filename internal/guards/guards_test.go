package guards

import "testing"

func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range All() {
		n := g.String()
		if n == "unknown" || seen[n] {
			t.Fatalf("guard %d: name %q", g, n)
		}
		seen[n] = true
	}
	if len(seen) != len(names) {
		t.Fatalf("All lists %d guards, %d are named", len(seen), len(names))
	}
	if Guard(99).String() != "unknown" {
		t.Fatal("unknown guard has a name")
	}
}

func TestNormalBuildKeepsEveryGuard(t *testing.T) {
	if Enabled {
		t.Skip("causeway_guards build")
	}
	for _, g := range All() {
		if Off(g) {
			t.Fatalf("%s is off in a normal build", g)
		}
	}
}
