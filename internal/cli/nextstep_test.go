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

// TestForwardRefusedIsNotANoNodeHint: a node that could not connect to the
// shard leader it forwards a write to (a leader killed) answers with the
// leader's peer address and "connection refused"; kvctl added "no node
// listens at the endpoint: check --endpoints", although the endpoint
// answered.
func TestForwardRefusedIsNotANoNodeHint(t *testing.T) {
	msg := `put: router: node unavailable: the node could not connect to another node to forward the request: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7812: connect: connection refused" (the call made 3 attempts in 2s) (Unavailable)`
	if h := nextStep(msg); strings.Contains(h, "no node listens") {
		t.Fatalf("nextStep(%q) = %q", msg, h)
	}
	if h := nextStep(`put: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7800: connect: connection refused" (Unavailable)`); !strings.Contains(h, "no node listens") {
		t.Fatalf("an endpoint that refuses connections gets %q", h)
	}
}
