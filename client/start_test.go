package client

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client/clienttest"
)

func TestPickStart(t *testing.T) {
	const ms = time.Millisecond
	connecting := endpointDial{state: dialConnecting}
	failed := endpointDial{state: dialFailed}
	ready := func(at time.Duration) endpointDial { return endpointDial{state: dialReady, readyAt: at} }
	tests := []struct {
		name    string
		dials   []endpointDial
		now     time.Duration
		ep      int
		recheck time.Duration
		none    bool
	}{
		{"nothing yet", []endpointDial{connecting, connecting}, 5 * ms, -1, 0, false},
		{"the first is ready", []endpointDial{ready(2 * ms), connecting}, 2 * ms, 0, 0, false},
		{"the first is ready after a later one", []endpointDial{ready(9 * ms), ready(1 * ms)}, 9 * ms, 0, 0, false},
		{"the failed first is passed over at once", []endpointDial{failed, ready(1 * ms)}, 1 * ms, 1, 0, false},
		{"every one failed", []endpointDial{failed, failed}, 3 * ms, -1, 0, true},
		{"a later one is ready: wait for the first", []endpointDial{connecting, ready(1 * ms)}, 1 * ms, -1, 300 * ms, false},
		{"a later one is ready: wait on", []endpointDial{connecting, ready(1 * ms)}, 60 * ms, -1, 241 * ms, false},
		{"a later one is ready: the first had its time", []endpointDial{connecting, ready(1 * ms)}, 301 * ms, 1, 0, false},
		{"a slow later one: as long again", []endpointDial{connecting, ready(400 * ms)}, 700 * ms, -1, 100 * ms, false},
		{"a slow later one: the first had its time", []endpointDial{connecting, ready(400 * ms)}, 800 * ms, 1, 0, false},
		{"the first ready one in order wins", []endpointDial{connecting, ready(50 * ms), ready(1 * ms)}, 350 * ms, 1, 0, false},
		{"a failed one before the ready one does not wait", []endpointDial{failed, connecting, failed, ready(1 * ms)}, 30 * ms, -1, 271 * ms, false},
		{"the last one, with the others failed", []endpointDial{failed, failed, ready(1 * ms)}, 1 * ms, 2, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, recheck, none := pickStart(tt.dials, tt.now)
			if ep != tt.ep || recheck != tt.recheck || none != tt.none {
				t.Fatalf("pickStart = (%d, %v, %v), want (%d, %v, %v)", ep, recheck, none, tt.ep, tt.recheck, tt.none)
			}
		})
	}
}

// targets records the endpoint of every call a client starts (unary and
// streams, the call stream's opening and watchNode's probes included).
type targets struct {
	mu  sync.Mutex
	all []string
}

func (r *targets) add(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, target)
}

func (r *targets) saw(target string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.all, target)
}

func (r *targets) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.add(cc.Target())
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			r.add(cc.Target())
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// TestFirstCallSkipsASilentFirstEndpoint: with a first endpoint that
// takes connections and answers nothing (a node stopped with SIGSTOP),
// the first call of a client was sent to it and waited for a status probe
// to go unanswered (2 s; a get on the call stream waited for the whole
// attempt, a put then asked the silent node for its site) before it
// failed over, so that kvctl, a new client per command, paid that on
// every command. The client dials every endpoint at once and starts at
// the first one whose connection is ready: no call goes to the silent
// endpoint, and the calls complete before a probe could have left it.
func TestFirstCallSkipsASilentFirstEndpoint(t *testing.T) {
	silent := clienttest.SilentAddr(t)
	f, addr := startFake(t)
	var rec targets
	cfg := DefaultConfig()
	cfg.Endpoints = []string{silent, addr}
	cfg.DialTimeout = time.Minute
	cfg.RequestTimeout = time.Minute
	cfg.DisableLeaderRouting = true
	cfg.DialOptions = rec.dialOptions()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put with a silent first endpoint: %v", err)
	}
	it, err := c.Get(ctx, []byte("k"))
	if err != nil || string(it.Value) != "v" {
		t.Fatalf("Get with a silent first endpoint = %q, %v", it.Value, err)
	}
	took := time.Since(start)
	if rec.saw(silent) {
		t.Fatalf("calls were sent to the silent first endpoint: %v", rec.all)
	}
	if got := f.Calls(); got != 2 {
		t.Fatalf("the live endpoint served %d calls, want the put and the get", got)
	}
	if took >= probeAfter+probeTimeout {
		t.Fatalf("the put and the get took %v: as long as a probe of the silent endpoint", took)
	}
}

// TestFirstReadyEndpointInOrderIsKept: with every endpoint live, calls
// start at the first (the client's own site), not at whichever answered
// the handshake first.
func TestFirstReadyEndpointInOrderIsKept(t *testing.T) {
	first, addr1 := startFake(t)
	second, addr2 := startFake(t)
	c := newTestClient(t, addr1, addr2)
	for range 3 {
		if _, err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if first.Calls() != 3 || second.Calls() != 0 {
		t.Fatalf("calls: %d to the first endpoint, %d to the second; want all 3 to the first", first.Calls(), second.Calls())
	}
}

// TestNoReadyEndpointSaysWhy: a call whose context ends before any
// endpoint's connection is ready fails with its context's code and says
// how far each connection got.
func TestNoReadyEndpointSaysWhy(t *testing.T) {
	silent1, silent2 := clienttest.SilentAddr(t), clienttest.SilentAddr(t)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{silent1, silent2}
	cfg.DialTimeout = time.Minute
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Get(ctx, []byte("k"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Get with two silent endpoints = %v, want DEADLINE_EXCEEDED", err)
	}
	want := "no endpoint was ready before the call's context ended (context deadline exceeded): " +
		silent1 + ": connecting (no answer to the connection handshake yet); " + silent2 + ": connecting (no answer to the connection handshake yet)"
	if msg := status.Convert(err).Message(); !strings.HasSuffix(msg, want) {
		t.Fatalf("Get with two silent endpoints: %q, want %q", msg, want)
	}
}

// TestCallToAConnectingEndpointEndsWithItsContext: a Get on the call
// stream sent to a node whose connection was not ready yet (stopped with
// SIGSTOP) waited, opening the stream, until the attempt's deadline,
// although its context was canceled long before (Ctrl-C in kvctl, or
// watchNode's end of a call to a node that answers no probe). It ends
// with its context.
func TestCallToAConnectingEndpointEndsWithItsContext(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{clienttest.SilentAddr(t)}
	cfg.DialTimeout = time.Minute
	cfg.RequestTimeout = time.Minute
	cfg.MaxRetries = NoRetries
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	_, err = c.Get(ctx, []byte("k"))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Get canceled after 100ms returned after %v (%v)", took, err)
	}
	if code := status.Code(err); code != codes.Canceled && code != codes.Unavailable {
		t.Fatalf("canceled Get = %v, want CANCELED (or UNAVAILABLE: the probe found the node silent)", err)
	}
}
