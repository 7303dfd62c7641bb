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

// TestSilentEndpointNextStep: an endpoint whose node takes connections and
// answers nothing (stopped with SIGSTOP) failed with gRPC's words only
// ("error reading server preface", "context deadline exceeded while
// waiting for connections to become ready"); kvctl says what they mean,
// except of a node's forward to another node.
func TestSilentEndpointNextStep(t *testing.T) {
	for _, msg := range []string{
		`get: connection error: desc = "error reading server preface: raw-read tcp 127.0.0.1:52522->127.0.0.1:7500: use of closed network connection" (the call made 6 attempts in 5.919s) (Unavailable)`,
		`1 of 3 endpoints failed; 127.0.0.1:7500: status: context deadline exceeded while waiting for connections to become ready (the call made 2 attempts in 10.004s) (DeadlineExceeded)`,
		`get: context deadline exceeded (the last answer before it: client: the node stopped answering (no answer to a status probe within 1s); the call made 5 attempts in 10s) (DeadlineExceeded)`,
	} {
		if h := nextStep(msg); !strings.Contains(h, "it may be stopped or hung") {
			t.Errorf("nextStep(%q) = %q", msg, h)
		}
	}
	msg := `put: router: node unavailable: the node could not connect to another node to forward the request: connection error: desc = "error reading server preface: EOF" (Unavailable)`
	if h := nextStep(msg); h != "" {
		t.Errorf("nextStep(%q) = %q", msg, h)
	}
}
