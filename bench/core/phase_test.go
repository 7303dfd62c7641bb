package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeClient cycles through kinds operations; every failEvery-th call (of
// this client) fails, Do sleeps delay (or until its context ends), and
// Next sleeps prepare.
type fakeClient struct {
	kinds            int
	delay, prepare   time.Duration
	failEvery        int
	calls, skips     *atomic.Int64
	n, kind          int
	busy             time.Duration // spin instead of sleeping
	blockUntilCancel bool
}

func (c *fakeClient) Next() int {
	if c.prepare > 0 {
		time.Sleep(c.prepare)
	}
	c.kind = c.n % max(c.kinds, 1)
	return c.kind
}

func (c *fakeClient) Do(ctx context.Context) error {
	c.n++
	c.calls.Add(1)
	if c.blockUntilCancel {
		<-ctx.Done()
		return ctx.Err()
	}
	if c.busy > 0 {
		for end := time.Now().Add(c.busy); time.Now().Before(end); {
		}
	}
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	if c.failEvery > 0 && c.n%c.failEvery == 0 {
		return KindError("boom", fmt.Errorf("call %d: injected", c.n))
	}
	return nil
}

func (c *fakeClient) Skip() { c.skips.Add(1) }

// fakes returns n clients sharing the call and skip counters.
func fakes(n int, proto fakeClient) ([]Client, *atomic.Int64, *atomic.Int64) {
	var calls, skips atomic.Int64
	out := make([]Client, n)
	for i := range out {
		c := proto
		c.calls, c.skips = &calls, &skips
		out[i] = &c
	}
	return out, &calls, &skips
}

var twoKinds = []string{"READ", "UPDATE"}

// TestRunPhaseKinds: with an operation budget every operation is measured
// once (no warm-up), per kind, and the merged histogram holds them all.
func TestRunPhaseKinds(t *testing.T) {
	clients, calls, _ := fakes(4, fakeClient{kinds: 2})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: twoKinds, Operations: 8000}, clients)
	if err != nil {
		t.Fatal(err)
	}
	if m.Ops != 8000 || calls.Load() != 8000 || m.Errors != 0 || m.WarmupOps != 0 || m.Clients != 4 {
		t.Fatalf("ops %d calls %d errors %d warm-up %d clients %d", m.Ops, calls.Load(), m.Errors, m.WarmupOps, m.Clients)
	}
	r, u := m.Kind("READ"), m.Kind("UPDATE")
	// Each client alternates the kinds, so they differ by at most one per client.
	if r.Ops+u.Ops != 8000 || r.Ops < 3996 || u.Ops < 3996 || len(m.Kinds) != 2 {
		t.Errorf("kinds %+v", m.Kinds)
	}
	if m.Latency.Count != 8000 || r.Latency.Count+u.Latency.Count != 8000 {
		t.Errorf("merged %d samples, kinds %d + %d", m.Latency.Count, r.Latency.Count, u.Latency.Count)
	}
	if h := m.Histogram(""); h == nil || h.TotalCount() != 8000 || m.Histogram("READ").TotalCount() != r.Ops {
		t.Error("histograms missing or wrong")
	}
	if m.WindowS <= 0 || math.Abs(m.Throughput-8000/m.WindowS) > 1e-6 {
		t.Errorf("window %.3fs throughput %.0f", m.WindowS, m.Throughput)
	}
	if m.Kind("SCAN").Ops != 0 {
		t.Error("a kind that did not run has operations")
	}
}

// TestRunPhaseCountsErrors: failed operations are counted by kind and
// class, kept out of the histograms and the throughput, and sampled.
func TestRunPhaseCountsErrors(t *testing.T) {
	clients, _, _ := fakes(1, fakeClient{kinds: 2, failEvery: 10})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: twoKinds, Operations: 1000}, clients)
	if err != nil {
		t.Fatal(err)
	}
	if m.Errors != 100 || m.Ops != 900 {
		t.Fatalf("ops %d errors %d, want 900 and 100", m.Ops, m.Errors)
	}
	if m.ErrorClasses["boom"] != 100 || len(m.ErrorClasses) != 1 || m.ErrorSummary() != "boom 100" {
		t.Errorf("classes %v (%q)", m.ErrorClasses, m.ErrorSummary())
	}
	if m.Latency.Count != m.Ops {
		t.Errorf("histogram %d samples, %d successful ops", m.Latency.Count, m.Ops)
	}
	// Calls 10, 20, ... fail: each was prepared after an odd number of
	// calls, so as kind 1, UPDATE.
	if m.Kind("UPDATE").Errors != 100 || m.Kind("READ").Errors != 0 {
		t.Errorf("kind errors %+v", m.Kinds)
	}
	if len(m.ErrorSamples) != MaxErrorSamples || !strings.HasPrefix(m.ErrorSamples[0], "UPDATE: boom: call 10: injected") {
		t.Errorf("samples %q", m.ErrorSamples)
	}
	if m.Throughput != float64(m.Ops)/m.WindowS {
		t.Error("throughput counts errors")
	}
}

// TestRunPhaseExcludesWarmup: operations starting during the warm-up are
// executed but not measured, the window is the measured duration, and
// warm-up plus measured operations are all that were executed.
func TestRunPhaseExcludesWarmup(t *testing.T) {
	clients, calls, _ := fakes(2, fakeClient{kinds: 1, delay: time.Millisecond})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: []string{"put"}, Warmup: 150 * time.Millisecond, Duration: 250 * time.Millisecond}, clients)
	if err != nil {
		t.Fatal(err)
	}
	if m.WarmupOps == 0 || m.Ops == 0 {
		t.Fatalf("warm-up ops %d, measured %d: both should be positive", m.WarmupOps, m.Ops)
	}
	if m.Attempts() != calls.Load() {
		t.Errorf("warm-up %d + measured %d + errors %d != executed %d", m.WarmupOps, m.Ops, m.Errors, calls.Load())
	}
	if m.WindowS != 0.25 || m.WarmupS != 0.15 {
		t.Errorf("window %.3fs warm-up %.3fs, want 0.25 and 0.15", m.WindowS, m.WarmupS)
	}
	if m.Throughput != float64(m.Ops)/0.25 {
		t.Errorf("throughput %.1f, want %d/0.25", m.Throughput, m.Ops)
	}
	// Each client does at most one 1ms operation at a time.
	if m.Ops > 2*250+10 {
		t.Errorf("measured %d ops in 250ms with 2 clients sleeping 1ms each", m.Ops)
	}
	if m.Latency.P50Ms < 1 {
		t.Errorf("p50 %.3f ms below the 1ms operation", m.Latency.P50Ms)
	}
}

// TestRunPhaseSkipsAfterWindow: an operation prepared when the window has
// closed is skipped, not sent.
func TestRunPhaseSkipsAfterWindow(t *testing.T) {
	clients, calls, skips := fakes(1, fakeClient{kinds: 1, prepare: 30 * time.Millisecond})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: []string{"INSERT"}, Duration: 45 * time.Millisecond}, clients)
	if err != nil {
		t.Fatal(err)
	}
	// The client's last prepared operation is always skipped; the ones
	// before it (one, unless the machine stalled the first Next past
	// the window) were sent and measured.
	if skips.Load() != 1 || calls.Load() > 1 || m.Ops != calls.Load() {
		t.Errorf("calls %d skips %d ops %d, want at most 1 call, measured, and 1 skip", calls.Load(), skips.Load(), m.Ops)
	}
}

func TestRunPhaseTargetRate(t *testing.T) {
	clients, _, _ := fakes(4, fakeClient{kinds: 1})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: []string{"READ"}, Duration: 500 * time.Millisecond, TargetRate: 400}, clients)
	if err != nil {
		t.Fatal(err)
	}
	if m.Ops < 150 || m.Ops > 230 || m.TargetRate != 400 {
		t.Errorf("%d ops in 0.5s at 400 ops/s, want ≈200", m.Ops)
	}
}

// TestRunPhaseCancel: cancelling ends the phase at once with the
// context's error; the operations it interrupted are not errors, and the
// window is the part that passed.
func TestRunPhaseCancel(t *testing.T) {
	clients, calls, _ := fakes(2, fakeClient{kinds: 1, blockUntilCancel: true})
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	m, err := RunPhase(ctx, PhaseSpec{Kinds: []string{"READ"}, Duration: time.Minute,
		Progress: &buf, ProgressEvery: 100 * time.Millisecond, Label: "[test]"}, clients)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the context's", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancelled phase took %s", el)
	}
	if calls.Load() != 2 || m.Errors != 0 || m.Ops != 0 {
		t.Errorf("calls %d errors %d ops %d: interrupted operations are neither", calls.Load(), m.Errors, m.Ops)
	}
	if m.WindowS < 0.2 || m.WindowS > 2 {
		t.Errorf("window %.3fs, want the 0.3s that passed", m.WindowS)
	}
	if !strings.Contains(buf.String(), "[test]") || !strings.Contains(buf.String(), "ops/s") {
		t.Errorf("progress output %q", buf.String())
	}
}

// TestRunPhaseOpTimeout: an operation that outlives OpTimeout fails as a
// timeout.
func TestRunPhaseOpTimeout(t *testing.T) {
	clients, _, _ := fakes(1, fakeClient{kinds: 1, blockUntilCancel: true})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: []string{"READ"}, Operations: 2, OpTimeout: 20 * time.Millisecond}, clients)
	if err != nil {
		t.Fatal(err)
	}
	if m.Errors != 2 || m.ErrorClasses["timeout"] != 2 {
		t.Errorf("errors %d classes %v, want 2 timeouts", m.Errors, m.ErrorClasses)
	}
}

func TestRunPhaseRejectsBadSpec(t *testing.T) {
	clients, _, _ := fakes(1, fakeClient{})
	k := []string{"x"}
	for _, c := range []struct {
		spec PhaseSpec
		n    int
	}{
		{PhaseSpec{Kinds: k, Duration: time.Second}, 0},
		{PhaseSpec{Kinds: k}, 1},
		{PhaseSpec{Duration: time.Second}, 1},
		{PhaseSpec{Kinds: k, Duration: time.Second, Warmup: -1}, 1},
		{PhaseSpec{Kinds: k, Duration: time.Second, TargetRate: -1}, 1},
	} {
		if _, err := RunPhase(context.Background(), c.spec, clients[:c.n]); err == nil {
			t.Errorf("accepted %+v with %d clients", c.spec, c.n)
		}
	}
}

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{KindError("not_found", errors.New("x")), "not_found"},
		{fmt.Errorf("get: %w", KindError("bad_value", errors.New("x"))), "bad_value"},
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("op: %w", context.Canceled), "canceled"},
		{status.Error(codes.DeadlineExceeded, "slow"), "DeadlineExceeded"},
		{fmt.Errorf("client: get: %w", status.Error(codes.Unavailable, "down")), "Unavailable"},
		{status.Error(codes.Unknown, "?"), "other"},
		{errors.New("boom"), "other"},
	} {
		if got := ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestRunPhaseReportsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc")
	}
	clients, _, _ := fakes(2, fakeClient{kinds: 1, busy: 200 * time.Microsecond})
	m, err := RunPhase(context.Background(), PhaseSpec{Kinds: []string{"READ"}, Warmup: 50 * time.Millisecond,
		Duration: 300 * time.Millisecond, ServerPIDs: []int{os.Getpid()}}, clients)
	if err != nil {
		t.Fatal(err)
	}
	c := m.CPU
	if c.Total < 1 || c.Client < 0.1 || c.Machine < 0.1 || math.Abs(c.Servers-c.Client) > 0.2 {
		t.Errorf("CPU use %+v: the busy clients should show, as this process and as the server pid", c)
	}
}

// TestServerCPUCountsDescendants: a server pid's CPU time includes the
// processes it started (here a shell whose child spins).
func TestServerCPUCountsDescendants(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sh", "-c", `sh -c 'while :; do :; done' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	time.Sleep(50 * time.Millisecond) // the child starts
	a := TakeCPUSample([]int{cmd.Process.Pid})
	time.Sleep(400 * time.Millisecond)
	u := CPUBetween(a, TakeCPUSample([]int{cmd.Process.Pid}))
	// The shell itself only waits: without its child the figure is 0.
	if u.Servers < 0.05 {
		t.Errorf("server CPUs %.2f, want the spinning child's (up to 1)", u.Servers)
	}
	if st, ok := readProcStat(cmd.Process.Pid); !ok || st.ppid != os.Getpid() {
		t.Errorf("/proc stat of the shell: %+v %v", st, ok)
	}
}
