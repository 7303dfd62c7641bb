package cli

import (
	"strings"
	"testing"
)

// TestUnknownKeyspaceNextStep: kvctl advises creating a keyspace only when
// the node said plainly that it has none; not when it said that a keyspace
// created moments ago has not reached it yet (retry), nor when its site may
// not have heard from the others.
func TestUnknownKeyspaceNextStep(t *testing.T) {
	if h := nextStep(`put: router: unknown keyspace "orders" (NotFound)`); !strings.Contains(h, "kvctl keyspace create") {
		t.Errorf("plain unknown keyspace: %q", h)
	}
	for _, msg := range []string{
		`put: router: unknown keyspace "orders": created moments ago, it has not reached node b1 yet; retry in a moment (NotFound)`,
		`put: router: unknown keyspace "orders": site s3 may not know every keyspace (it has not reached site(s) s1 lately); if it was created at another site, retry once this site reaches the others, or use a node of another site (NotFound)`,
	} {
		if h := nextStep(msg); strings.Contains(h, "create") {
			t.Errorf("%s: advises %q", msg, h)
		}
	}
}
