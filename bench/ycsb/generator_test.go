package ycsb

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

// allWorkloads returns the core workloads and the ChainReaction mixes.
func allWorkloads(t testing.TB) []Workload {
	t.Helper()
	var ws []Workload
	for _, name := range CoreNames {
		w, err := Core(name)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return append(ws, ChainReactionMixes()...)
}

func newGen(t testing.TB, w Workload, seed uint64) (*Generator, *Counter) {
	t.Helper()
	c := NewCounter(w.RecordCount)
	g, err := NewGenerator(w, seed, c)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func TestCoreWorkloads(t *testing.T) {
	type mix [numKinds]float64 // read, update, insert, scan, rmw, txn
	for _, tc := range []struct {
		names []string
		mix   mix
		dist  string
	}{
		{[]string{"A", "a", "workloada", "WorkloadA"}, mix{0.5, 0.5, 0, 0, 0, 0}, DistZipfian},
		{[]string{"B"}, mix{0.95, 0.05, 0, 0, 0, 0}, DistZipfian},
		{[]string{"C"}, mix{1, 0, 0, 0, 0, 0}, DistZipfian},
		{[]string{"D"}, mix{0.95, 0, 0.05, 0, 0, 0}, DistLatest},
		{[]string{"E"}, mix{0, 0, 0.05, 0.95, 0, 0}, DistZipfian},
		{[]string{"F"}, mix{0.5, 0, 0, 0, 0.5, 0}, DistZipfian},
	} {
		for _, name := range tc.names {
			w, err := Core(name)
			if err != nil {
				t.Fatalf("Core(%q): %v", name, err)
			}
			for k := OpRead; k <= OpTxnRead; k++ {
				if w.Proportion(k) != tc.mix[k-1] {
					t.Errorf("Core(%q) %s proportion %v, want %v", name, k, w.Proportion(k), tc.mix[k-1])
				}
			}
			if w.RequestDistribution != tc.dist || w.Name != tc.names[0] {
				t.Errorf("Core(%q): name %q distribution %q, want %q %q", name, w.Name, w.RequestDistribution, tc.names[0], tc.dist)
			}
		}
	}
	if w, _ := Core("E"); w.MaxScanLength != 100 {
		t.Errorf("E max scan length %d, want 100", w.MaxScanLength)
	}
	for _, name := range []string{"G", "", "workload", "hot-50-50"} {
		if _, err := Core(name); !errors.Is(err, ErrUnknownWorkload) {
			t.Errorf("Core(%q) = %v, want ErrUnknownWorkload", name, err)
		}
	}
	for _, w := range allWorkloads(t) {
		if err := w.Validate(); err != nil {
			t.Errorf("%s: %v", w.Name, err)
		}
		if got, err := Lookup(w.Name); err != nil || got != w {
			t.Errorf("Lookup(%q) = %+v, %v", w.Name, got, err)
		}
	}
}

func TestValidate(t *testing.T) {
	a, _ := Core("A")
	for _, tc := range []struct {
		name string
		edit func(*Workload)
	}{
		{"negative proportion", func(w *Workload) { w.ReadProportion, w.UpdateProportion = -0.5, 1.5 }},
		{"sum below 1", func(w *Workload) { w.UpdateProportion = 0.05 }},
		{"sum above 1", func(w *Workload) { w.InsertProportion = 0.1 }},
		{"NaN", func(w *Workload) { w.ScanProportion = math.NaN() }},
		{"no records", func(w *Workload) { w.RecordCount = 0 }},
		{"negative op count", func(w *Workload) { w.OperationCount = -1 }},
		{"negative field length", func(w *Workload) { w.FieldLength = -1 }},
		{"unknown distribution", func(w *Workload) { w.RequestDistribution = "exponential" }},
		{"hotspot fraction", func(w *Workload) { w.RequestDistribution, w.HotspotOpnFraction = DistHotspot, 1.2 }},
		{"scan length", func(w *Workload) {
			w.UpdateProportion, w.ScanProportion, w.MaxScanLength = 0, 0.5, 0
		}},
		{"txn keys 0", func(w *Workload) { w.UpdateProportion, w.TxnProportion, w.TxnKeys = 0, 0.5, 0 }},
		{"txn keys > records", func(w *Workload) {
			w.UpdateProportion, w.TxnProportion, w.TxnKeys, w.RecordCount = 0, 0.5, 5, 4
		}},
		{"txn on single key", func(w *Workload) {
			w.UpdateProportion, w.TxnProportion, w.RequestDistribution = 0, 0.5, DistSingle
		}},
	} {
		w := a
		tc.edit(&w)
		if err := w.Validate(); !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("%s: Validate = %v, want ErrInvalidWorkload", tc.name, err)
		}
		if _, err := NewGenerator(w, 1, NewCounter(w.RecordCount)); !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("%s: NewGenerator = %v, want ErrInvalidWorkload", tc.name, err)
		}
	}
	if _, err := NewGenerator(a, 1, nil); err == nil {
		t.Error("NewGenerator with nil counter succeeded")
	}
	if _, err := NewGenerator(a, 1, NewCounter(a.RecordCount+1)); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("NewGenerator with mismatched counter: %v", err)
	}
}

// checkOp checks the shape of one op against its workload.
func checkOp(w Workload, op Op) error {
	wantValue := op.Kind == OpInsert || op.Kind == OpUpdate || op.Kind == OpReadModifyWrite
	switch {
	case wantValue && len(op.Value) != w.FieldLength:
		return fmt.Errorf("%s value of %d bytes, want %d", op.Kind, len(op.Value), w.FieldLength)
	case !wantValue && op.Value != nil:
		return fmt.Errorf("%s with a value", op.Kind)
	case op.Kind == OpTxnRead && (op.Key != "" || len(op.Keys) != w.TxnKeys):
		return fmt.Errorf("txn with key %q and %d keys, want none and %d", op.Key, len(op.Keys), w.TxnKeys)
	case op.Kind != OpTxnRead && (op.Key != KeyName(op.KeyNum) || op.Keys != nil):
		return fmt.Errorf("%s key %q for record %d (keys %v)", op.Kind, op.Key, op.KeyNum, op.Keys)
	case op.Kind == OpScan && (op.ScanLen < 1 || op.ScanLen > w.MaxScanLength):
		return fmt.Errorf("scan length %d not in [1, %d]", op.ScanLen, w.MaxScanLength)
	case op.Kind != OpScan && op.ScanLen != 0:
		return fmt.Errorf("%s with scan length %d", op.Kind, op.ScanLen)
	}
	for _, b := range op.Value {
		if b < ' ' || b > '_' {
			return fmt.Errorf("value byte %q not printable", b)
		}
	}
	return nil
}

func TestMixProportions(t *testing.T) {
	const ops = 200_000
	seed := testSeed(t, 20)
	for _, w := range allWorkloads(t) {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			w.FieldLength = 16 // values are tested apart; keep this fast
			g, c := newGen(t, w, seed)
			var counts [numKinds]int
			for range ops {
				op := g.Next()
				if err := checkOp(w, op); err != nil {
					t.Fatal(err)
				}
				counts[op.Kind-1]++
				if op.Kind == OpInsert {
					if err := c.Acknowledge(op.KeyNum); err != nil {
						t.Fatal(err)
					}
				}
			}
			var line string
			for k := OpRead; k <= OpTxnRead; k++ {
				got, want := float64(counts[k-1])/ops, w.Proportion(k)
				if got > 0 || want > 0 {
					line += fmt.Sprintf(" %s %.4f/%.2f", k, got, want)
				}
				if math.Abs(got-want) > 0.01 {
					t.Errorf("%s: observed %.4f, configured %.2f", k, got, want)
				}
			}
			t.Logf("%s observed/configured:%s", w.Name, line)
		})
	}
}

// opsOf returns n ops of a fresh generator, inserts acknowledged at once.
func opsOf(t *testing.T, w Workload, seed uint64, n int) []Op {
	t.Helper()
	g, c := newGen(t, w, seed)
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = g.Next()
		if ops[i].Kind == OpInsert {
			if err := c.Acknowledge(ops[i].KeyNum); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ops
}

func opEqual(a, b Op) bool {
	return a.Kind == b.Kind && a.Key == b.Key && a.KeyNum == b.KeyNum && a.ScanLen == b.ScanLen &&
		slices.Equal(a.Keys, b.Keys) && string(a.Value) == string(b.Value)
}

func TestDeterminism(t *testing.T) {
	const n = 20_000
	seed := testSeed(t, 21)
	for _, w := range allWorkloads(t) {
		w.FieldLength = 64
		a, b, c := opsOf(t, w, seed, n), opsOf(t, w, seed, n), opsOf(t, w, seed+1, n)
		for i := range a {
			if !opEqual(a[i], b[i]) {
				t.Fatalf("%s, seed %d: op %d differs between runs: %+v vs %+v", w.Name, seed, i, a[i], b[i])
			}
		}
		var differ int
		for i := range a {
			if !opEqual(a[i], c[i]) {
				differ++
			}
		}
		// Writes differ by value; ops on the single hot key only by kind
		// (hot-5-95: 10% differ), and hot-0-100 is one read repeated.
		if w.Name == "hot-0-100" {
			continue
		}
		if differ < n/50 {
			t.Errorf("%s: seeds %d and %d give %d of %d ops different", w.Name, seed, seed+1, differ, n)
		}
	}
	// Values differ by seed.
	w, _ := Core("A")
	g1, _ := newGen(t, w, seed)
	g2, _ := newGen(t, w, seed+1)
	if string(g1.Value()) == string(g2.Value()) {
		t.Errorf("seeds %d and %d give the same value", seed, seed+1)
	}
	// The value stream is separate: the value size does not change the ops.
	w.FieldLength = 10
	short := opsOf(t, w, seed, n)
	w.FieldLength = 1000
	for i, op := range opsOf(t, w, seed, n) {
		if op.Kind != short[i].Kind || op.Key != short[i].Key {
			t.Fatalf("op %d with 1000-byte values %s %s, with 10-byte values %s %s", i, op.Kind, op.Key, short[i].Kind, short[i].Key)
		}
	}
}

// Reads never ask for a record above the acknowledged limit, while inserts
// finish out of order.
func TestReadsStayBelowLimit(t *testing.T) {
	r := testRand(testSeed(t, 22))
	for _, w := range allWorkloads(t) {
		for _, dist := range []string{w.RequestDistribution, DistUniform, DistLatest, DistHotspot} {
			w := w
			w.RequestDistribution, w.FieldLength = dist, 8
			if w.InsertProportion == 0 {
				w.ReadProportion -= 0.2
				w.InsertProportion = 0.2
			}
			if err := w.Validate(); err != nil {
				t.Fatal(err)
			}
			g, c := newGen(t, w, r.Uint64())
			var pending []int64
			for i := range 20_000 {
				limit := c.Limit()
				op := g.Next()
				if op.Kind == OpInsert {
					pending = append(pending, op.KeyNum)
				} else {
					keys := op.Keys
					if op.Kind != OpTxnRead {
						keys = []string{op.Key}
					}
					for _, k := range keys {
						if !loaded(k, limit) {
							t.Fatalf("%s/%s op %d: %s of %s beyond limit %d", w.Name, dist, i, op.Kind, k, limit)
						}
					}
				}
				// Up to 20 inserts in flight; finish a random one.
				for len(pending) > r.IntN(20) {
					j := r.IntN(len(pending))
					if err := c.Acknowledge(pending[j]); err != nil {
						t.Fatal(err)
					}
					pending = slices.Delete(pending, j, j+1)
				}
			}
			if w.InsertProportion > 0 && c.Limit() < w.RecordCount+500 {
				t.Errorf("%s/%s: limit %d barely advanced", w.Name, dist, c.Limit())
			}
		}
	}
}

// keyNums maps the keys of the first records to their numbers.
var keyNums = sync.OnceValue(func() map[string]int64 {
	m := make(map[string]int64)
	for n, k := range LoadKeys(10_000) {
		m[k] = n
	}
	return m
})

// loaded reports whether key is the key of a record numbered <= limit.
func loaded(key string, limit int64) bool {
	n, ok := keyNums()[key]
	return ok && n <= limit
}

// The latest distribution after inserts: the newest record is the most
// read, and reads concentrate on the newest records as SkewedLatest's
// zipfian predicts.
func TestLatestDistribution(t *testing.T) {
	const reads, inserted = 500_000, 200
	w, _ := Core("D")
	g, c := newGen(t, w, testSeed(t, 23))
	for range inserted {
		if err := c.Acknowledge(c.NextInsert()); err != nil {
			t.Fatal(err)
		}
	}
	newest := c.Limit()
	if newest != w.RecordCount+inserted-1 {
		t.Fatalf("limit %d", newest)
	}
	counts := make([]int, newest+1)
	for range reads {
		counts[g.NextKeyNum()]++
	}
	z, err := NewZipfian(newest, ZipfianConstant) // the age of a read, in records
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != 0 {
		t.Errorf("record 0 read %d times; YCSB's SkewedLatest never returns it", counts[0])
	}
	if hot := hottest(counts, 1)[0]; int64(hot) != newest {
		t.Errorf("most read record %d, want the newest, %d", hot, newest)
	}
	for _, age := range []int64{0, 1, 10, 100} {
		obs, want := float64(counts[newest-age])/reads, sampleProb(z, age)
		t.Logf("record newest-%d: observed %.5f, expected %.5f", age, obs, want)
		if !within(obs, want, reads, 5) {
			t.Errorf("record newest-%d: observed %.5f, want %.5f", age, obs, want)
		}
	}
	recent := (newest + 1) / 10
	var obs, want float64
	for age := range recent {
		obs += float64(counts[newest-age]) / reads
		want += sampleProb(z, age)
	}
	t.Logf("newest %d of %d records: %.4f of reads observed, %.4f expected", recent, newest+1, obs, want)
	if !within(obs, want, reads, 5) || obs < 0.5 {
		t.Errorf("newest 10%% got %.4f of reads, want %.4f (and >= 0.5)", obs, want)
	}
}

func TestScanLengths(t *testing.T) {
	const ops = 200_000
	w, _ := Core("E")
	w.FieldLength = 8
	g, c := newGen(t, w, testSeed(t, 24))
	counts := make([]int, w.MaxScanLength+1)
	for range ops {
		op := g.Next()
		switch op.Kind {
		case OpScan:
			if op.ScanLen < 1 || op.ScanLen > w.MaxScanLength {
				t.Fatalf("scan length %d", op.ScanLen)
			}
			counts[op.ScanLen]++
		case OpInsert:
			if err := c.Acknowledge(op.KeyNum); err != nil {
				t.Fatal(err)
			}
		}
	}
	probs := make([]float64, len(counts))
	for l := 1; l <= w.MaxScanLength; l++ {
		probs[l] = 1 / float64(w.MaxScanLength)
	}
	stat, bound := chiSquare(counts, probs)
	t.Logf("scan lengths 1..%d: %d..%d each; chi-square %.1f (bound %.1f)", w.MaxScanLength,
		slices.Min(counts[1:]), slices.Max(counts[1:]), stat, bound)
	if stat > bound || counts[1] == 0 || counts[w.MaxScanLength] == 0 {
		t.Errorf("scan lengths not uniform on [1, %d]: chi-square %.1f > %.1f or an end missing", w.MaxScanLength, stat, bound)
	}
}

func TestTxnKeysDistinct(t *testing.T) {
	r := testRand(testSeed(t, 25))
	for _, tc := range []struct {
		records int64
		keys    int
		dist    string
	}{
		{1000, 5, DistZipfian},
		{1000, 20, DistLatest},
		{5, 5, DistZipfian}, // every record in every txn
		{3, 3, DistLatest},  // needs the fallback: latest never draws record 0
		{1, 1, DistSingle},
		{100, 10, DistHotspot},
		{100, 10, DistUniform},
	} {
		w, _ := Lookup("txn-0-95-5")
		w.RecordCount, w.TxnKeys, w.RequestDistribution = tc.records, tc.keys, tc.dist
		g, _ := newGen(t, w, r.Uint64())
		var txns int
		for range 20_000 {
			op := g.Next()
			if op.Kind != OpTxnRead {
				continue
			}
			txns++
			seen := map[string]bool{}
			for _, k := range op.Keys {
				if seen[k] || !loaded(k, tc.records-1) {
					t.Fatalf("%+v: txn keys %v repeat or go beyond the records", tc, op.Keys)
				}
				seen[k] = true
			}
			if len(op.Keys) != tc.keys {
				t.Fatalf("%+v: txn of %d keys", tc, len(op.Keys))
			}
		}
		if txns < 500 {
			t.Errorf("%+v: %d txns of 20000 ops", tc, txns)
		}
	}
}

func TestKeyDistributions(t *testing.T) {
	const draws = 200_000
	seed := testSeed(t, 26)
	w, _ := Core("C")
	w.RecordCount = 100

	w.RequestDistribution = DistUniform
	g, _ := newGen(t, w, seed)
	counts := make([]int, w.RecordCount)
	for range draws {
		counts[g.NextKeyNum()]++
	}
	uniform := make([]float64, w.RecordCount)
	for i := range uniform {
		uniform[i] = 1 / float64(w.RecordCount)
	}
	if stat, bound := chiSquare(counts, uniform); stat > bound {
		t.Errorf("uniform: chi-square %.1f > %.1f", stat, bound)
	}

	w.RequestDistribution = DistHotspot
	g, _ = newGen(t, w, seed)
	var hot int
	for range draws {
		if g.NextKeyNum() < 20 {
			hot++
		}
	}
	t.Logf("hotspot: %.4f of requests on the hot 20%% (want 0.8)", float64(hot)/draws)
	if !within(float64(hot)/draws, 0.8, draws, 5) {
		t.Errorf("hotspot: %.4f of requests on the hot set, want 0.8", float64(hot)/draws)
	}

	w.RequestDistribution = DistSingle
	g, _ = newGen(t, w, seed)
	for range 1000 {
		if n := g.NextKeyNum(); n != 0 {
			t.Fatalf("single: record %d", n)
		}
	}
}

func TestValue(t *testing.T) {
	w, _ := Core("A")
	r := testRand(testSeed(t, 27))
	for _, size := range []int{0, 1, 9, 10, 11, 1000, 4096} {
		w.FieldLength = size
		g, _ := newGen(t, w, r.Uint64())
		a, b := g.Value(), g.Value()
		if len(a) != size || len(b) != size {
			t.Fatalf("value sizes %d %d, want %d", len(a), len(b), size)
		}
		if size >= 10 && string(a) == string(b) {
			t.Errorf("size %d: two values equal", size)
		}
		var hist [64]int
		for _, c := range a {
			if c < ' ' || c > '_' {
				t.Fatalf("byte %q", c)
			}
			hist[c-' ']++
		}
		if size == 4096 && slices.Min(hist[:]) == 0 {
			t.Errorf("4096-byte value misses some of the 64 characters: %v", hist)
		}
	}
}

func benchmarkNext(b *testing.B, name, dist string) {
	w, err := Lookup(name)
	if err != nil {
		b.Fatal(err)
	}
	w.RecordCount, w.OperationCount = 1_000_000, 10_000_000
	if dist != "" {
		w.RequestDistribution = dist
	}
	g, c := newGen(b, w, 1)
	b.ReportAllocs()
	for b.Loop() {
		if op := g.Next(); op.Kind == OpInsert {
			if err := c.Acknowledge(op.KeyNum); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkNextZipfian(b *testing.B) { benchmarkNext(b, "C", "") }
func BenchmarkNextUniform(b *testing.B) { benchmarkNext(b, "C", DistUniform) }
func BenchmarkNextHotspot(b *testing.B) { benchmarkNext(b, "C", DistHotspot) }
func BenchmarkNextLatest(b *testing.B)  { benchmarkNext(b, "D", "") }
func BenchmarkNextUpdate(b *testing.B)  { benchmarkNext(b, "A", "") }
func BenchmarkNextScan(b *testing.B)    { benchmarkNext(b, "E", "") }
func BenchmarkNextHotKey(b *testing.B)  { benchmarkNext(b, "hot-50-50", "") }
func BenchmarkNextTxn(b *testing.B)     { benchmarkNext(b, "txn-10-85-5", "") }

// Clients share one Counter, each with its own generator, inserting and
// acknowledging concurrently; run with -race.
func TestConcurrentGenerators(t *testing.T) {
	const clients, ops = 4, 5000
	seed := testSeed(t, 28)
	for _, name := range []string{"D", "E"} {
		w, _ := Core(name)
		w.FieldLength = 8
		c := NewCounter(w.RecordCount)
		var wg sync.WaitGroup
		for i := range clients {
			g, err := NewGenerator(w, seed+uint64(i), c)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var pending []int64
				for range ops {
					op := g.Next()
					if op.Kind == OpInsert {
						pending = append(pending, op.KeyNum)
					} else if op.KeyNum > c.Limit() {
						t.Errorf("%s: %s of record %d above limit %d", name, op.Kind, op.KeyNum, c.Limit())
						return
					}
					if len(pending) == 3 { // finish inserts late, newest first
						for _, n := range slices.Backward(pending) {
							if err := c.Acknowledge(n); err != nil {
								t.Error(err)
								return
							}
						}
						pending = pending[:0]
					}
				}
				for _, n := range pending {
					if err := c.Acknowledge(n); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if c.Limit() != c.Issued() || c.Issued() < w.RecordCount+clients*ops/40 {
			t.Errorf("%s: limit %d, issued %d", name, c.Limit(), c.Issued())
		}
	}
}
