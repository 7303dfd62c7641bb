package ycsbrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

func workload(t *testing.T, name string, records int64) ycsb.Workload {
	t.Helper()
	w, err := ycsb.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	w.RecordCount, w.FieldLength = records, 64
	return w
}

func loaded(t *testing.T, records int64) *drivers.Memory {
	t.Helper()
	m := drivers.NewMemory()
	if _, err := Load(context.Background(), m, LoadConfig{ValueSize: 64, Seed: 7, LoadSpec: core.LoadSpec{Records: records, Concurrency: 4}}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunExecutesTheMix runs workload A with an operation budget: every
// operation is measured once (no warm-up), the kinds follow the 50/50
// proportions, the per-kind counts match what the driver executed, and the
// merged histogram holds every kind's samples.
func TestRunExecutesTheMix(t *testing.T) {
	m := loaded(t, 1000)
	res, err := Run(context.Background(), m, RunConfig{Workload: workload(t, "A", 1000), Clients: 4, Seed: 1, PhaseSpec: core.PhaseSpec{Operations: 8000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 8000 || res.Errors != 0 || res.WarmupOps != 0 {
		t.Fatalf("ops %d errors %d warm-up %d, want 8000, 0, 0", res.Ops, res.Errors, res.WarmupOps)
	}
	reads, updates := res.Kind("READ"), res.Kind("UPDATE")
	if reads.Ops != m.Reads.Load() || updates.Ops != m.Updates.Load() {
		t.Errorf("measured reads %d updates %d, driver executed %d and %d", reads.Ops, updates.Ops, m.Reads.Load(), m.Updates.Load())
	}
	if f := float64(reads.Ops) / 8000; math.Abs(f-0.5) > 0.03 {
		t.Errorf("read fraction %.3f, want 0.5", f)
	}
	if len(res.Kinds) != 2 {
		t.Errorf("kinds %+v, want READ and UPDATE only", res.Kinds)
	}
	if res.Latency.Count != reads.Latency.Count+updates.Latency.Count || res.Latency.Count != 8000 {
		t.Errorf("merged histogram has %d samples, kinds %d + %d", res.Latency.Count, reads.Latency.Count, updates.Latency.Count)
	}
	if h := res.Histogram(""); h == nil || h.TotalCount() != 8000 {
		t.Errorf("merged histogram missing or wrong")
	}
	if res.WindowS <= 0 || res.Throughput <= 0 || math.Abs(res.Throughput-8000/res.WindowS) > 1e-6 {
		t.Errorf("window %.3fs throughput %.0f", res.WindowS, res.Throughput)
	}
	if res.Mode != drivers.ModeMemory || res.System != "memory" || res.Workload != "A" || res.Clients != 4 || res.Records != 1000 || res.ValueSize != 64 {
		t.Errorf("labels %+v", res)
	}
	// Every update wrote a 64-byte value over a loaded record.
	if m.Len() != 1000 {
		t.Errorf("%d records, want 1000 (updates must not create keys)", m.Len())
	}
}

// TestRunWorkloadsMixes checks the operation kinds of the other mixes.
func TestRunWorkloadsMixes(t *testing.T) {
	for _, c := range []struct {
		name  string
		kinds map[string]float64
	}{
		{"B", map[string]float64{"READ": 0.95, "UPDATE": 0.05}},
		{"C", map[string]float64{"READ": 1}},
		{"F", map[string]float64{"READ": 0.5, "READ-MODIFY-WRITE": 0.5}},
		{"D", map[string]float64{"READ": 0.95, "INSERT": 0.05}},
		{"hot-25-75", map[string]float64{"READ": 0.75, "UPDATE": 0.25}},
		{"txn-10-85-5", map[string]float64{"READ": 0.85, "UPDATE": 0.10, "TXN-READ": 0.05}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := loaded(t, 500)
			res, err := Run(context.Background(), m, RunConfig{Workload: workload(t, c.name, 500), Clients: 3, Seed: 3, PhaseSpec: core.PhaseSpec{Operations: 6000}})
			if err != nil {
				t.Fatal(err)
			}
			// D reads the newest records: an insert acknowledged before
			// it finished would make a read miss.
			if res.Errors != 0 {
				t.Fatalf("%d errors: %v %v", res.Errors, res.ErrorClasses, res.ErrorSamples)
			}
			for _, k := range res.Kinds {
				want, ok := c.kinds[k.Kind]
				if !ok {
					t.Errorf("unexpected kind %s", k.Kind)
					continue
				}
				if f := float64(k.Ops) / float64(res.Ops); math.Abs(f-want) > 0.03 {
					t.Errorf("%s fraction %.3f, want %.2f", k.Kind, f, want)
				}
			}
		})
	}
}

// TestRunExcludesWarmup: operations starting during the warm-up are
// executed but not measured, the window is the measured duration, and
// warm-up plus measured operations are all the driver executed.
func TestRunExcludesWarmup(t *testing.T) {
	m := loaded(t, 100)
	m.Delay = time.Millisecond
	before := m.Reads.Load() + m.Updates.Load()
	res, err := Run(context.Background(), m, RunConfig{Workload: workload(t, "A", 100), Clients: 2, Seed: 1, PhaseSpec: core.PhaseSpec{Warmup: 150 * time.Millisecond, Duration: 250 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	executed := m.Reads.Load() + m.Updates.Load() - before
	if res.WarmupOps == 0 || res.Ops == 0 {
		t.Fatalf("warm-up ops %d, measured %d: both should be positive", res.WarmupOps, res.Ops)
	}
	if res.WarmupOps+res.Ops+res.Errors != executed {
		t.Errorf("warm-up %d + measured %d + errors %d != executed %d", res.WarmupOps, res.Ops, res.Errors, executed)
	}
	if res.WindowS != 0.25 || res.WarmupS != 0.15 {
		t.Errorf("window %.3fs warm-up %.3fs, want 0.25 and 0.15", res.WindowS, res.WarmupS)
	}
	if res.Throughput != float64(res.Ops)/0.25 {
		t.Errorf("throughput %.1f, want %d/0.25", res.Throughput, res.Ops)
	}
	// Each client does at most one 1ms operation at a time.
	if max := int64(2 * 250); res.Ops > max+10 {
		t.Errorf("measured %d ops in 250ms with 2 clients sleeping 1ms each", res.Ops)
	}
	if res.Latency.P50Ms < 1 {
		t.Errorf("p50 %.3f ms below the 1ms injected delay", res.Latency.P50Ms)
	}
}

// TestRunCountsErrors: failed operations are counted by kind and class and
// kept out of the histograms and the throughput.
func TestRunCountsErrors(t *testing.T) {
	m := loaded(t, 100)
	m.FailEvery = 10 // set after the load's 100 calls: every tenth run call fails
	res, err := Run(context.Background(), m, RunConfig{Workload: workload(t, "A", 100), Clients: 1, Seed: 1, PhaseSpec: core.PhaseSpec{Operations: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 100 || res.Ops != 900 {
		t.Fatalf("ops %d errors %d, want 900 and 100", res.Ops, res.Errors)
	}
	if res.ErrorClasses["other"] != res.Errors {
		t.Errorf("classes %v", res.ErrorClasses)
	}
	if res.Latency.Count != res.Ops {
		t.Errorf("histogram %d samples, %d successful ops", res.Latency.Count, res.Ops)
	}
	var kindErrs int64
	for _, k := range res.Kinds {
		kindErrs += k.Errors
	}
	if kindErrs != res.Errors {
		t.Errorf("kind errors %d, total %d", kindErrs, res.Errors)
	}
	if len(res.ErrorSamples) == 0 || len(res.ErrorSamples) > core.MaxErrorSamples || !strings.Contains(res.ErrorSamples[0], "injected") {
		t.Errorf("samples %q", res.ErrorSamples)
	}
	if res.Throughput != float64(res.Ops)/res.WindowS {
		t.Errorf("throughput counts errors")
	}
}

func TestRunTargetRate(t *testing.T) {
	m := loaded(t, 100)
	res, err := Run(context.Background(), m, RunConfig{Workload: workload(t, "C", 100), Clients: 4, Seed: 1, PhaseSpec: core.PhaseSpec{Duration: 500 * time.Millisecond, TargetRate: 400}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops < 150 || res.Ops > 230 {
		t.Errorf("%d ops in 0.5s at 400 ops/s, want ≈200", res.Ops)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	m := drivers.NewMemory()
	w := workload(t, "A", 10)
	for _, cfg := range []RunConfig{
		{Workload: w, Clients: 0, PhaseSpec: core.PhaseSpec{Duration: time.Second}},
		{Workload: w, Clients: 1},
		{Workload: w, Clients: 1, PhaseSpec: core.PhaseSpec{Duration: time.Second, Warmup: -1}},
		{Workload: ycsb.Workload{Name: "bad"}, Clients: 1, PhaseSpec: core.PhaseSpec{Duration: time.Second}},
	} {
		if _, err := Run(context.Background(), m, cfg); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
}

// TestLoadIsDeterministic: the loaded values depend on the seed and the
// record only, not on the concurrency.
func TestLoadIsDeterministic(t *testing.T) {
	a, b := drivers.NewMemory(), drivers.NewMemory()
	var buf bytes.Buffer
	ra, err := Load(context.Background(), a, LoadConfig{ValueSize: 100, Seed: 9, LoadSpec: core.LoadSpec{Records: 300, Concurrency: 1, Progress: &buf}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), b, LoadConfig{ValueSize: 100, Seed: 9, LoadSpec: core.LoadSpec{Records: 300, Concurrency: 13}}); err != nil {
		t.Fatal(err)
	}
	if ra.Loaded != 300 || ra.Latency.Count != 300 || a.Len() != 300 || b.Len() != 300 {
		t.Fatalf("loaded %d (latency samples %d), stores %d and %d", ra.Loaded, ra.Latency.Count, a.Len(), b.Len())
	}
	for n := range int64(300) {
		k := ycsb.KeyName(n)
		va, _ := a.Get(k)
		vb, _ := b.Get(k)
		if !bytes.Equal(va, vb) || !bytes.Equal(va, RecordValue(9, n, 100)) || len(va) != 100 {
			t.Fatalf("record %d differs between loads", n)
		}
	}
	if bytes.Equal(RecordValue(9, 0, 100), RecordValue(9, 1, 100)) || bytes.Equal(RecordValue(9, 0, 100), RecordValue(10, 0, 100)) {
		t.Error("values do not depend on the record and seed")
	}
}

func TestLoadRetriesThenFails(t *testing.T) {
	m := drivers.NewMemory()
	m.FailEvery = 3 // every third call fails: retries succeed
	res, err := Load(context.Background(), m, LoadConfig{ValueSize: 8, LoadSpec: core.LoadSpec{Records: 60, Concurrency: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Retries == 0 || m.Len() != 60 {
		t.Errorf("retries %d, records %d", res.Retries, m.Len())
	}
	m2 := drivers.NewMemory()
	m2.FailEvery = 1 // everything fails
	if _, err := Load(context.Background(), m2, LoadConfig{ValueSize: 8, LoadSpec: core.LoadSpec{Records: 5, Attempts: 2}}); !errors.Is(err, drivers.ErrInjected) {
		t.Errorf("err %v, want the injected failure", err)
	}
}

func TestExecuteDispatches(t *testing.T) {
	m := loaded(t, 10)
	d, _ := m.Driver(0)
	ctx := context.Background()
	c := ycsb.NewCounter(10)
	n := c.NextInsert()
	for _, op := range []ycsb.Op{
		{Kind: ycsb.OpRead, Key: ycsb.KeyName(1)},
		{Kind: ycsb.OpUpdate, Key: ycsb.KeyName(1), Value: []byte("x")},
		{Kind: ycsb.OpInsert, Key: ycsb.KeyName(n), KeyNum: n, Value: []byte("y")},
		{Kind: ycsb.OpScan, Key: ycsb.KeyName(0), ScanLen: 3},
		{Kind: ycsb.OpReadModifyWrite, Key: ycsb.KeyName(2), Value: []byte("z")},
		{Kind: ycsb.OpTxnRead, Keys: []string{ycsb.KeyName(3), ycsb.KeyName(4)}},
	} {
		if err := Execute(ctx, d, op, c); err != nil {
			t.Errorf("%s: %v", op.Kind, err)
		}
	}
	if m.Reads.Load() != 1 || m.Updates.Load() != 1 || m.Inserts.Load() != 11 || m.Scans.Load() != 1 || m.RMWs.Load() != 1 || m.TxnReads.Load() != 1 {
		t.Errorf("calls: %d %d %d %d %d %d", m.Reads.Load(), m.Updates.Load(), m.Inserts.Load(), m.Scans.Load(), m.RMWs.Load(), m.TxnReads.Load())
	}
	if c.Limit() != n {
		t.Errorf("insert not acknowledged: limit %d, want %d", c.Limit(), n)
	}
	if err := Execute(ctx, d, ycsb.Op{Kind: ycsb.OpRead, Key: "missing"}, c); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("missing key: %v", err)
	}
	if err := Execute(ctx, d, ycsb.Op{Kind: 99}, c); err == nil {
		t.Error("unknown kind accepted")
	}
}

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{drivers.ErrNotFound, "not_found"},
		{fmt.Errorf("rmw: %w", drivers.ErrConflict), "conflict"},
		{context.DeadlineExceeded, "timeout"},
		{status.Error(codes.DeadlineExceeded, "slow"), "DeadlineExceeded"},
		{fmt.Errorf("client: get: %w", status.Error(codes.Unavailable, "down")), "Unavailable"},
		{errors.New("boom"), "other"},
	} {
		if got := ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
