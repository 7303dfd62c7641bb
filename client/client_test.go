package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client/clienttest"
	"github.com/causeway-db/causeway/internal/causal"
)

// startFake runs a fake node for the test.
func startFake(t *testing.T) (*clienttest.Server, string) {
	t.Helper()
	f := clienttest.Start(t)
	return f, f.Addr()
}

// newTestClient returns a client for endpoints with fast retries.
func newTestClient(t *testing.T, endpoints ...string) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.RetryBackoff = time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	// The fake counts every call and fails injected ones in order: keep
	// the routing table's background Admin calls out of it.
	cfg.DisableLeaderRouting = true
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Endpoints = []string{"127.0.0.1:7379"}
	tests := []struct {
		name string
		edit func(*Config)
		want error
	}{
		{"default with endpoint", func(*Config) {}, nil},
		{"zero durations take defaults", func(c *Config) { c.DialTimeout, c.RequestTimeout, c.RetryBackoff = 0, 0, 0 }, nil},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, ErrNoEndpoints},
		{"empty endpoint", func(c *Config) { c.Endpoints = []string{"a:1", ""} }, ErrInvalidConfig},
		{"host names and IPv6", func(c *Config) { c.Endpoints = []string{"kv-1.example:7379", "[::1]:7379", ":7379"} }, nil},
		{"endpoint without port", func(c *Config) { c.Endpoints = []string{"127.0.0.1"} }, ErrInvalidConfig},
		{"endpoint with a port name", func(c *Config) { c.Endpoints = []string{"a:http"} }, ErrInvalidConfig},
		{"endpoint port out of range", func(c *Config) { c.Endpoints = []string{"a:65536"} }, ErrInvalidConfig},
		{"endpoint port zero", func(c *Config) { c.Endpoints = []string{"a:0"} }, ErrInvalidConfig},
		{"negative dial timeout", func(c *Config) { c.DialTimeout = -1 }, ErrInvalidConfig},
		{"negative request timeout", func(c *Config) { c.RequestTimeout = -1 }, ErrInvalidConfig},
		{"negative backoff", func(c *Config) { c.RetryBackoff = -1 }, ErrInvalidConfig},
		{"no retries", func(c *Config) { c.MaxRetries = NoRetries }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewRejectsMalformedSession(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:1"}
	cfg.SessionToken = []byte("garbage token")
	_, err := New(context.Background(), cfg)
	if !errors.Is(err, ErrMalformedSession) {
		t.Fatalf("New() = %v, want ErrMalformedSession", err)
	}
}

func TestPutGetCarriesSession(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()

	v, err := c.Put(ctx, []byte("k"), []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.Get(ctx, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if !it.Found || string(it.Value) != "v1" || it.Version != v {
		t.Fatalf("Get = %+v, want v1 at %v", it, v)
	}
	// The Get carried the Put's version as the key's floor.
	sessions := f.Sessions()
	tok := sessions[len(sessions)-1]
	s, err := causal.DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if floor, ok := s.Floor(DefaultKeyspace, []byte("k")); !ok || floor != v {
		t.Fatalf("Get carried floor %v (%v), want %v", floor, ok, v)
	}

	// A second client resumes the session from the exported token.
	cfg := DefaultConfig()
	cfg.Endpoints = []string{addr}
	cfg.SessionToken = c.SessionToken()
	c2, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !bytes.Equal(c2.SessionToken(), c.SessionToken()) {
		t.Fatal("resumed client has a different session")
	}
	if _, err := c2.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	sessions = f.Sessions()
	sent, err := causal.DecodeSession(sessions[len(sessions)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The first request of a resumed session carries all of it (the
	// server may be at another site, which must see every floor).
	if floor, ok := sent.Floor(DefaultKeyspace, []byte("k")); !ok || floor != v || sent.Partial {
		t.Fatalf("resumed client sent floor %v (%v, partial %v), want %v in a whole session", floor, ok, sent.Partial, v)
	}
	if _, err := c2.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	sessions = f.Sessions()
	if sent, err = causal.DecodeSession(sessions[len(sessions)-1]); err != nil || !sent.Partial {
		t.Fatalf("the next request sent a whole session (%v)", err)
	}
}

// TestRequestsCarryOnlyTheirFloors: the client keeps every floor but a
// request carries only those it needs, so tokens stay small however many
// keys the session touched.
func TestRequestsCarryOnlyTheirFloors(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	var last Version
	for i := 0; i < 2*causal.MaxSessionKeys; i++ {
		v, err := c.Put(ctx, []byte(fmt.Sprint("key", i)), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	if _, err := c.Get(ctx, []byte("key5")); err != nil {
		t.Fatal(err)
	}
	sessions := f.Sessions()
	for i, tok := range sessions {
		if len(tok) > 64 {
			t.Fatalf("request %d carried a %d-byte token", i, len(tok))
		}
	}
	full, err := causal.DecodeSession(c.SessionToken())
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := full.Len(); keys < causal.MaxSessionKeys/2 || full.MaxHLC != last.HLC {
		t.Fatalf("client session keeps %d key floors, MaxHLC %d (want %d)", keys, full.MaxHLC, last.HLC)
	}
}

func TestRetryReusesRequestID(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	f.FailNext(codes.Unavailable, codes.Aborted, codes.ResourceExhausted)
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(); got != 5 {
		t.Fatalf("calls = %d, want 5 (3 failed attempts + 2)", got)
	}
	ids := f.PutRequestIDs()
	want := []uint64{1, 1, 1, 1, 2} // every attempt of the first Put reuses seq 1
	if len(ids) != len(want) {
		t.Fatalf("saw %d Put attempts, want %d", len(ids), len(want))
	}
	for i, id := range ids {
		if id.GetClientId() != c.ClientID() || id.GetSeq() != want[i] {
			t.Fatalf("attempt %d carried request id %v, want %s/%d", i, id, c.ClientID(), want[i])
		}
	}
}

func TestRetryIsIdempotentAcrossAttempts(t *testing.T) {
	// A CompareAndSwap whose reply is lost must not conflict with itself
	// on retry: the server answers the retry (same request id) with the
	// first outcome. The fake mimics that via its applied table.
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	f.LoseReplies(1)
	v1, err := c.CompareAndSwap(ctx, []byte("k"), ExpectAbsent(), []byte("a"))
	if err != nil {
		t.Fatalf("retried CompareAndSwap: %v", err)
	}
	if got := f.Calls(); got != 2 {
		t.Fatalf("attempts = %d, want 2", got)
	}
	if vs := f.Versions("default", "k"); len(vs) != 1 || vs[0].GetVersion().GetHlc() != v1.HLC {
		t.Fatalf("swap applied %d times, want once at %v", len(vs), v1)
	}
}

func TestNoRetryOnInvalidArgument(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	for _, code := range []codes.Code{codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists, codes.PermissionDenied} {
		before := f.Calls()
		f.FailNext(code)
		_, err := c.Put(context.Background(), []byte("k"), []byte("v"))
		if status.Code(err) != code {
			t.Fatalf("status.Code(%v) = %v, want %v", err, status.Code(err), code)
		}
		if !strings.HasPrefix(err.Error(), "client: put: ") {
			t.Fatalf("error %q lacks the operation prefix", err)
		}
		if got := f.Calls() - before; got != 1 {
			t.Fatalf("%v: %d attempts, want 1", code, got)
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	f, addr := startFake(t)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{addr}
	cfg.MaxRetries = 2
	cfg.RetryBackoff = time.Millisecond
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f.FailNext(codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable)
	_, err = c.Get(context.Background(), []byte("k"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if got := f.Calls(); got != 3 {
		t.Fatalf("attempts = %d, want 3", got)
	}
}

func TestFailover(t *testing.T) {
	f, addr := startFake(t)
	dead := clienttest.DeadAddr(t)
	c := newTestClient(t, dead, addr)
	ctx := context.Background()
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put with a dead first endpoint: %v", err)
	}
	if _, err := c.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(); got != 2 {
		t.Fatalf("live endpoint served %d calls, want 2", got)
	}
	// Pinning to the dead endpoint does not fail over.
	_, err := c.Status(ctx, WithEndpoint(dead))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Status on dead endpoint = %v, want Unavailable", err)
	}
	if _, err := c.Status(ctx, WithEndpoint("10.255.255.1:1")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Status on unknown endpoint = %v, want InvalidArgument", err)
	}
}

// TestBareConfigRetriesAndFailsOver: a Config with only Endpoints set
// retries and fails over as DefaultConfig does (a zero MaxRetries once
// meant no retry: every call through a failing first endpoint failed),
// and with NoRetries the call that met the failing endpoint fails but the
// next one goes to the next endpoint. (A first endpoint that is down from
// the start gets no call at all: TestFirstCallSkipsASilentFirstEndpoint.)
func TestBareConfigRetriesAndFailsOver(t *testing.T) {
	first, firstAddr := startFake(t)
	_, addr := startFake(t)
	ctx := context.Background()
	c, err := New(ctx, Config{Endpoints: []string{firstAddr, addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first.FailNextData(codes.Unavailable)
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put with a failing first endpoint and a bare Config: %v", err)
	}

	nr, err := New(ctx, Config{Endpoints: []string{firstAddr, addr}, MaxRetries: NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	first.FailNextData(codes.Unavailable)
	if _, err := nr.Put(ctx, []byte("k"), []byte("v")); status.Code(err) != codes.Unavailable {
		t.Fatalf("Put without retries through a failing endpoint: %v, want Unavailable", err)
	}
	if _, err := nr.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("the next Put without retries: %v; want it sent to the live endpoint", err)
	}
}

// TestDeadFirstEndpointGetsNoCall: a first endpoint where nothing listens
// fails its connection at once; the first call starts at the next one.
func TestDeadFirstEndpointGetsNoCall(t *testing.T) {
	_, addr := startFake(t)
	dead := clienttest.DeadAddr(t)
	var rec targets
	cfg := DefaultConfig()
	cfg.Endpoints = []string{dead, addr}
	cfg.MaxRetries = NoRetries
	cfg.DialOptions = rec.dialOptions()
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put without retries, with a dead first endpoint: %v", err)
	}
	if rec.saw(dead) {
		t.Fatalf("calls were sent to the dead first endpoint: %v", rec.all)
	}
}

func TestCallerDeadlineBoundsAttempts(t *testing.T) {
	f, addr := startFake(t)
	f.Block(true)
	c := newTestClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Get(ctx, []byte("k"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("call took %v despite a 200ms deadline", el)
	}
}

// TestDeadlineKeepsTheLastAnswer: the first attempt is answered with a
// retryable error that says why (a session waiting to move, say); the
// retry is cut by the caller's deadline. The call's error keeps the
// deadline's code and says what the server answered.
func TestDeadlineKeepsTheLastAnswer(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	f.FailNextData(codes.Unavailable)
	f.BlockFrom(2)
	// The blocked attempt may end by the server's copy of the deadline,
	// a moment before the client's (cutByServer; 2 of 20 race-enabled
	// runs lost the answer before it counted as cut).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.Get(ctx, []byte("k"))
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "the last answer before it: injected Unavailable") {
		t.Fatalf("err = %v, want DeadlineExceeded with the first attempt's answer (calls %d)", err, f.Calls())
	}
}

func TestRequestTimeoutRetries(t *testing.T) {
	f, addr := startFake(t)
	f.Block(true)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{addr}
	cfg.RequestTimeout = 50 * time.Millisecond
	cfg.RetryBackoff = time.Millisecond
	cfg.MaxRetries = 2
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(context.Background(), []byte("k"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if got := f.Calls(); got != 3 {
		t.Fatalf("attempts = %d, want 3", got)
	}
}

func TestCompareAndSwap(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	key := []byte("k")

	if _, err := c.CompareAndSwap(ctx, key, Expect{}, []byte("x")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("zero Expect: %v, want InvalidArgument", err)
	}
	v1, err := c.CompareAndSwap(ctx, key, ExpectAbsent(), []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompareAndSwap(ctx, key, ExpectAbsent(), []byte("b"))
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want *ConflictError", err)
	}
	if !ce.Found || ce.Current != v1 || ce.Code != codes.AlreadyExists || status.Code(err) != codes.AlreadyExists {
		t.Fatalf("conflict = %+v (code %v), want found at %v, AlreadyExists", ce, status.Code(err), v1)
	}
	v2, err := c.CompareAndSwap(ctx, key, ExpectVersion(v1), []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompareAndSwap(ctx, key, ExpectVersion(v1), []byte("c"))
	if !errors.As(err, &ce) || ce.Current != v2 || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale expectation: %v, want FailedPrecondition conflict at %v", err, v2)
	}
	vd, err := c.CompareAndDelete(ctx, key, ExpectVersion(v2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompareAndSwap(ctx, key, ExpectVersion(v2), []byte("d"))
	if !errors.As(err, &ce) || ce.Found || ce.Current != vd || status.Code(err) != codes.NotFound {
		t.Fatalf("expect version on deleted key: %v, want NotFound conflict", err)
	}
	if !strings.Contains(ce.Error(), "deleted") {
		t.Fatalf("message %q does not say the key is deleted", ce.Error())
	}
	it, err := c.Get(ctx, key)
	if err != nil || it.Found {
		t.Fatalf("Get after CompareAndDelete = %+v, %v", it, err)
	}
}

func TestScanAll(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	for i := range 25 {
		if _, err := c.Put(ctx, fmt.Appendf(nil, "p/%02d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, []byte("q/other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	collect := func(so ScanOptions) []string {
		t.Helper()
		var keys []string
		for it, err := range c.ScanAll(ctx, so) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, string(it.Key))
		}
		return keys
	}
	if got := collect(ScanOptions{Prefix: []byte("p/")}); len(got) != 25 || got[0] != "p/00" || got[24] != "p/24" {
		t.Fatalf("ScanAll prefix = %v", got)
	}
	if got := collect(ScanOptions{Prefix: []byte("p/"), Limit: 12}); len(got) != 12 || got[11] != "p/11" {
		t.Fatalf("ScanAll limit 12 = %v", got)
	}
	if got := collect(ScanOptions{Start: []byte("p/20"), End: []byte("q")}); len(got) != 5 {
		t.Fatalf("ScanAll range = %v", got)
	}
	page, err := c.Scan(ctx, ScanOptions{Prefix: []byte("p/"), KeysOnly: true})
	if err != nil || len(page.Items) != 10 || len(page.Continuation) == 0 || len(page.Items[0].Value) != 0 {
		t.Fatalf("Scan page = %+v, %v", page, err)
	}
	if _, err := c.Scan(ctx, ScanOptions{Prefix: []byte("p/"), Start: []byte("a")}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("prefix+start: %v, want InvalidArgument", err)
	}
	// The iteration stops early when the caller breaks.
	n := 0
	for range c.ScanAll(ctx, ScanOptions{}) {
		n++
		break
	}
	if n != 1 {
		t.Fatal("break did not stop ScanAll")
	}
}

func TestDeleteBatchGetHistory(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	v1, _ := c.Put(ctx, []byte("a"), []byte("1"))
	_, existed, err := c.Delete(ctx, []byte("a"))
	if err != nil || !existed {
		t.Fatalf("Delete = %v, %v", existed, err)
	}
	if _, existed, _ := c.Delete(ctx, []byte("never")); existed {
		t.Fatal("Delete of a missing key reported existed")
	}
	c.Put(ctx, []byte("b"), []byte("2"))
	items, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if err != nil || len(items) != 3 || items[0].Found || !items[1].Found || string(items[1].Value) != "2" || items[2].Found {
		t.Fatalf("BatchGet = %+v, %v", items, err)
	}
	h, err := c.History(ctx, []byte("a"), 0)
	if err != nil || len(h) != 2 || !h[0].Tombstone || h[1].Version != v1 || string(h[1].Value) != "1" {
		t.Fatalf("History = %+v, %v", h, err)
	}
	if h, err := c.History(ctx, []byte("never-written"), 5); err != nil || len(h) != 0 {
		t.Fatalf("History of unwritten key = %+v, %v", h, err)
	}
}

func TestAdmin(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || st.GetNodeId() != clienttest.NodeID || len(st.GetShards()) != 1 {
		t.Fatalf("Status = %v, %v", st, err)
	}
	if n, err := c.Snapshot(ctx, ""); err != nil || n != 1 {
		t.Fatalf("Snapshot = %d, %v", n, err)
	}
	if _, err := c.Snapshot(ctx, "nope"); status.Code(err) != codes.NotFound {
		t.Fatalf("Snapshot(unknown) = %v, want NotFound", err)
	}
}

func TestSiteAdmin(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()

	// The default site: the fake alone.
	m, err := c.Members(ctx)
	if err != nil || len(m.GetMembers()) != 1 || m.GetMembers()[0].GetNodeId() != clienttest.NodeID || m.GetCatalogLeader() != clienttest.NodeID {
		t.Fatalf("Members = %v, %v", m, err)
	}
	sh, err := c.Shards(ctx, "")
	if err != nil || len(sh.GetShards()) != 1 || sh.GetShards()[0].GetLeader() != clienttest.NodeID {
		t.Fatalf("Shards = %v, %v", sh, err)
	}
	if _, err := c.Shards(ctx, "nope"); status.Code(err) != codes.NotFound {
		t.Fatalf("Shards(unknown keyspace) = %v, want NotFound", err)
	}

	f.SetMembers(
		&adminv1.Member{Site: "s", NodeId: "n1", State: "alive", Replicas: 4},
		&adminv1.Member{Site: "s", NodeId: "n2", State: "alive", Replicas: 4},
	)
	f.SetDrainStep(2)
	epoch, err := c.Drain(ctx, "n2", false)
	if err != nil || epoch != 2 {
		t.Fatalf("Drain = %d, %v; want epoch 2", epoch, err)
	}
	for _, want := range []uint32{2, 0, 0} {
		m, err := c.Members(ctx)
		if err != nil || len(m.GetMembers()) != 2 {
			t.Fatalf("Members = %v, %v", m, err)
		}
		n2 := m.GetMembers()[1]
		if !n2.GetDraining() || n2.GetReplicas() != want || m.GetPlacementEpoch() != 2 {
			t.Fatalf("n2 while draining = %v (epoch %d), want %d replicas", n2, m.GetPlacementEpoch(), want)
		}
	}
	if epoch, err := c.Drain(ctx, "n2", true); err != nil || epoch != 3 {
		t.Fatalf("Drain(undo) = %d, %v", epoch, err)
	}
	if ms := f.SiteMembers(); ms[1].GetDraining() {
		t.Fatalf("n2 still draining after undo: %v", ms[1])
	}
	if drains := f.Drains(); len(drains) != 2 || drains[0].GetUndo() || !drains[1].GetUndo() {
		t.Fatalf("Drain requests = %v", drains)
	}

	if _, err := c.Drain(ctx, "n9", false); status.Code(err) != codes.NotFound {
		t.Fatalf("Drain(unknown node) = %v, want NotFound", err)
	}
	calls := f.Calls()
	if _, err := c.Drain(ctx, "", false); status.Code(err) != codes.InvalidArgument || f.Calls() != calls {
		t.Fatalf("Drain(\"\") = %v (calls %d -> %d), want InvalidArgument without a call", err, calls, f.Calls())
	}

	// Retried on Unavailable like the other admin calls.
	f.FailNext(codes.Unavailable, codes.Unavailable)
	if _, err := c.Members(ctx); err != nil {
		t.Fatalf("Members after two Unavailable = %v", err)
	}
	f.FailNext(codes.Unavailable)
	if _, err := c.Drain(ctx, "n1", false); err != nil {
		t.Fatalf("Drain after Unavailable = %v", err)
	}
	f.FailNext(codes.Internal)
	if _, err := c.Shards(ctx, ""); status.Code(err) != codes.Internal || !strings.HasPrefix(err.Error(), "client: shards: ") {
		t.Fatalf("Shards after Internal = %v", err)
	}
}

func TestClosed(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := c.Get(context.Background(), []byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
		ok   bool
	}{
		{"1723456789012.3@local", Version{HLC: causal.MakeHLC(1723456789012, 3), Site: "local"}, true},
		{"0.65535@a@b", Version{HLC: 65535, Site: "a@b"}, true},
		{"1.0", Version{}, false},
		{"1@s", Version{}, false},
		{"1.0@", Version{}, false},
		{".0@s", Version{}, false},
		{"1.@s", Version{}, false},
		{"-1.0@s", Version{}, false},
		{"+1.0@s", Version{}, false},
		{"1.65536@s", Version{}, false},
		{"281474976710656.0@s", Version{}, false},
		{"x.0@s", Version{}, false},
		{" 1.0@s", Version{}, false},
		{"", Version{}, false},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadVersion) {
			t.Errorf("ParseVersion(%q) error %v does not wrap ErrBadVersion", tt.in, err)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	f.Add("1723456789012.3@local")
	f.Add("0.0@s")
	f.Add("1.2@")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		// Whatever parses prints back to something that parses the same.
		w, err := ParseVersion(v.String())
		if err != nil || w != v {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, v, v.String(), w, err)
		}
	})
}

func TestWithKeyspace(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	if _, err := c.Put(ctx, []byte("k"), []byte("v"), WithKeyspace("users")); status.Code(err) != codes.NotFound {
		t.Fatalf("Put to unknown keyspace = %v, want NotFound", err)
	}
	f.AddKeyspace("users")
	v, err := c.Put(ctx, []byte("k"), []byte("v"), WithKeyspace("users"), WithDurability(DurabilityAll))
	if err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(ctx, []byte("k")); err != nil || it.Found {
		t.Fatalf("Get in the default keyspace = %+v, %v; want not found", it, err)
	}
	if it, err := c.Get(ctx, []byte("k"), WithKeyspace("users"), WithConsistency(Strong)); err != nil || !it.Found {
		t.Fatalf("Get in users = %+v, %v", it, err)
	}
	s, err := causal.DecodeSession(c.SessionToken())
	if err != nil {
		t.Fatal(err)
	}
	if floor, ok := s.Floor("users", []byte("k")); !ok || floor != v {
		t.Fatalf("session floor of users/k = %v (%v), want %v", floor, ok, v)
	}
}

// TestWithMinSitesDoesNotTruncate: a count that does not fit the
// request's 32-bit field is sent as the largest one (which the server
// refuses), never wrapped to a small count it would accept.
func TestWithMinSitesDoesNotTruncate(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want uint32
	}{
		{2, 2},
		{0, 0},
		{-1, 0},
		{math.MaxUint32, math.MaxUint32},
		{1<<32 + 1, math.MaxUint32},
		{99999999999, math.MaxUint32},
		{math.MaxInt, math.MaxUint32},
	} {
		var o callOptions
		WithMinSites(tt.n)(&o)
		if o.minSites != tt.want || o.durability != DurabilitySites {
			t.Errorf("WithMinSites(%d): min sites %d, durability %v; want %d, DurabilitySites", tt.n, o.minSites, o.durability, tt.want)
		}
	}
}

func TestConflictErrorMessage(t *testing.T) {
	v := Version{HLC: causal.MakeHLC(5, 1), Site: "s"}
	for _, tt := range []struct {
		e    ConflictError
		want string
	}{
		{ConflictError{Found: true, Current: v}, "key exists at version 5.1@s"},
		{ConflictError{Current: v}, "key is deleted (tombstone version 5.1@s)"},
		{ConflictError{}, "key is absent"},
	} {
		if got := tt.e.Error(); !strings.HasSuffix(got, tt.want) {
			t.Errorf("Error() = %q, want suffix %q", got, tt.want)
		}
	}
}

// TestCallStreamFallsBackToUnary: a server without KV.Stream (the fake,
// like a node of an older release) answers UNIMPLEMENTED on the stream;
// the call that found out goes unary, and so do the calls after it, with
// the same results.
func TestCallStreamFallsBackToUnary(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	ctx := context.Background()
	k, ok := c.kv[0].(*streamKV)
	if !ok {
		t.Fatalf("the data client is a %T, want the call stream's", c.kv[0])
	}
	v, err := c.Put(ctx, []byte("k"), []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	until := k.mu.unaryUntil
	k.mu.Unlock()
	if time.Until(until) < unaryRetry/2 {
		t.Fatalf("after UNIMPLEMENTED the client streams again at %v, want about %v from now", until, unaryRetry)
	}
	for range 3 {
		if it, err := c.Get(ctx, []byte("k")); err != nil || string(it.Value) != "v1" || it.Version != v {
			t.Fatalf("Get = %+v, %v", it, err)
		}
	}
	if got := f.Calls(); got != 4 {
		t.Fatalf("the fake served %d unary calls, want 4 (a put and three gets)", got)
	}
}

// TestRetriedCallSaysAttemptsAndTime: the server's text describes one
// attempt (a wait it timed); a call that made several attempts says how
// many and how long it took in all, keeping the status code.
func TestRetriedCallSaysAttemptsAndTime(t *testing.T) {
	f, addr := startFake(t)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{addr}
	cfg.RetryBackoff = time.Millisecond
	cfg.MaxRetries = 2
	cfg.DisableLeaderRouting = true
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f.FailNextData(codes.Unavailable, codes.Unavailable, codes.Unavailable)
	_, err = c.Get(context.Background(), []byte("k"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "injected Unavailable (the call made 3 attempts in ") {
		t.Fatalf("err = %v, want Unavailable saying the call made 3 attempts", err)
	}

	// A call answered by its first attempt says nothing more.
	f.FailNextData(codes.InvalidArgument)
	_, err = c.Get(context.Background(), []byte("k"))
	if status.Code(err) != codes.InvalidArgument || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("err = %v, want the server's InvalidArgument alone", err)
	}
}

// TestCallErrorDoesNotRepeatTheAnswer: when the attempt cut by the
// deadline carries the text of the answer before it, the error does not
// quote that answer a second time; the status details are kept.
func TestCallErrorDoesNotRepeatTheAnswer(t *testing.T) {
	const msg = "the write waits for sites b, c to apply it"
	answered := status.Error(codes.Unavailable, msg)
	st, err := status.New(codes.DeadlineExceeded, msg).WithDetails(&adminv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := callError(st.Err(), true, answered, nil, 4, 8*time.Second)
	want := msg + " (the call made 4 attempts in 8s)"
	gs := status.Convert(got)
	if gs.Code() != codes.DeadlineExceeded || gs.Message() != want || len(gs.Details()) != 1 {
		t.Fatalf("callError = %v (%d details), want DeadlineExceeded %q with the detail", got, len(gs.Details()), want)
	}
	// An answer that differs only in the times and versions it names is
	// not quoted either.
	durable := func(took string) error {
		return status.Error(codes.DeadlineExceeded, "version 1796627556911.0@s1 is committed; site s3 had not applied it "+took+" after its commit")
	}
	got = callError(durable("7.971s"), true, durable("6.98s"), nil, 3, 8*time.Second)
	if strings.Contains(got.Error(), "the last answer before it") || !strings.Contains(got.Error(), "7.971s after its commit (the call made 3 attempts in 8s)") {
		t.Fatalf("callError = %v, want the last answer alone with the attempts", got)
	}
	// Another answer is still quoted.
	got = callError(status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, answered, nil, 2, time.Second)
	if !strings.Contains(got.Error(), "(the last answer before it: "+msg+"; the call made 2 attempts in 1s)") {
		t.Fatalf("callError = %v, want the earlier answer and the attempts", got)
	}
}

// TestInvalidUTF8KeyspaceIsAnInvalidArgument: a keyspace that is not
// UTF-8 cannot be encoded in a request; the call fails INVALID_ARGUMENT
// before anything is sent, not INTERNAL.
func TestInvalidUTF8KeyspaceIsAnInvalidArgument(t *testing.T) {
	f, addr := startFake(t)
	c := newTestClient(t, addr)
	_, err := c.Get(context.Background(), []byte("k"), WithKeyspace("bad\xff"))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `keyspace "bad\xff" is not valid UTF-8`) {
		t.Fatalf("err = %v, want InvalidArgument naming the keyspace", err)
	}
	if got := f.Calls(); got != 0 {
		t.Fatalf("the fake saw %d calls, want none", got)
	}
}

// TestMessageOverTheSizeLimitIsNotRetried: gRPC refuses a request over the
// node's message limit with ResourceExhausted, the same on every attempt.
// The client sent a 64 MiB value six times and failed with gRPC's text
// alone; it sends it once and says what the limits are.
func TestMessageOverTheSizeLimitIsNotRetried(t *testing.T) {
	_, addr := startFake(t) // gRPC's default limit: 4 MiB a message
	var attempts atomic.Int32
	cfg := DefaultConfig()
	cfg.Endpoints = []string{addr}
	cfg.RetryBackoff = time.Millisecond
	cfg.DisableLeaderRouting = true
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		attempts.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Put(context.Background(), []byte("k"), bytes.Repeat([]byte("v"), 5<<20))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("put of a 5 MiB value: %v, want InvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "--max-value-bytes") {
		t.Fatalf("error %q does not give the value limit", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("put of a 5 MiB value made %d attempts, want 1", n)
	}
}

// TestCloseFailsCallsInFlightWithErrClosed: a call that Close ends while
// the node holds it fails with ErrClosed, on the call stream and unary,
// not with a "context canceled" that blames the caller's context; Repair
// after Close fails with ErrClosed too.
func TestCloseFailsCallsInFlightWithErrClosed(t *testing.T) {
	for _, unary := range []bool{false, true} {
		t.Run(fmt.Sprintf("unary=%v", unary), func(t *testing.T) {
			f, addr := startFake(t)
			cfg := DefaultConfig()
			cfg.Endpoints = []string{addr}
			cfg.DisableLeaderRouting = true
			cfg.DisableCallStream = unary
			c, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			f.Block(true)
			defer f.Block(false)
			done := make(chan error, 2)
			go func() { _, err := c.Put(ctx, []byte("k"), []byte("w")); done <- err }()
			go func() { _, err := c.Scan(ctx, ScanOptions{Prefix: []byte("k")}); done <- err }()
			deadline := time.Now().Add(10 * time.Second)
			for f.Calls() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if f.Calls() < 3 {
				t.Fatalf("the node received %d calls, want 3", f.Calls())
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := <-done; !errors.Is(err, ErrClosed) {
					t.Errorf("call in flight at Close = %v, want ErrClosed", err)
				}
			}
			if err := c.Repair(ctx, RepairOptions{}, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Repair after Close = %v, want ErrClosed", err)
			}
		})
	}
}
