package ycsb

import (
	"math"
	"slices"
	"testing"
)

func TestZetaMatchesSum(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 1000, zetaExactTerms, zetaExactTerms + 1, 10_000, 123_457, 1_000_000} {
		for _, theta := range []float64{0.5, ZipfianConstant} {
			got, want := Zeta(n, theta), zetaSum(0, n, theta, 0)
			if rel := math.Abs(got-want) / want; rel > 1e-12 {
				t.Errorf("Zeta(%d, %v) = %.15g, sum = %.15g (relative error %.2g)", n, theta, got, want, rel)
			}
		}
	}
}

// YCSB's ScrambledZipfianGenerator draws from 10^16 items but its ZETAN is
// ζ(10^10, 0.99), computed when ITEM_COUNT was 10^10. We keep both, as YCSB
// does; this test records where the constant comes from.
func TestScrambledZetanIsZetaOf1e10(t *testing.T) {
	if got := Zeta(1e10, ZipfianConstant); math.Abs(got-scrambledZetan) > 1e-9 {
		t.Errorf("Zeta(1e10) = %.15g, YCSB's ZETAN = %.15g", got, scrambledZetan)
	}
	if got := Zeta(scrambledMax+1, ZipfianConstant); math.Abs(got-scrambledZetan) < 1 {
		t.Errorf("Zeta(1e16) = %.15g unexpectedly close to ZETAN", got)
	}
}

// sampleProb, which the frequency tests use as the exact expectation of
// Sample, is a distribution and agrees with Sample on a fine grid of u.
func TestSampleProbIsSampleDistribution(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 10, 1000} {
		z, err := NewZipfian(n, ZipfianConstant)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for k := range n {
			sum += sampleProb(z, k)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("n=%d: sampleProb sums to %.12f", n, sum)
		}
		const grid = 1 << 20
		counts := make([]int, n)
		for i := range grid {
			counts[z.Sample((float64(i)+0.5)/grid)]++
		}
		for k := range min(n, 20) {
			if got, want := float64(counts[k])/grid, sampleProb(z, k); math.Abs(got-want) > 2.0/grid {
				t.Errorf("n=%d item %d: grid frequency %.7f, sampleProb %.7f", n, k, got, want)
			}
		}
	}
}

func TestZipfianSampleInRange(t *testing.T) {
	r := testRand(testSeed(t, 2))
	for _, n := range []int64{1, 2, 3, 10, 1_000_000, 1 << 40} {
		z, err := NewZipfian(n, ZipfianConstant)
		if err != nil {
			t.Fatal(err)
		}
		us := []float64{0, 0.5, math.Nextafter(1, 0)}
		for range 10000 {
			us = append(us, r.Float64())
		}
		for _, u := range us {
			if k := z.Sample(u); k < 0 || k >= n {
				t.Fatalf("n=%d: Sample(%v) = %d out of range", n, u, k)
			}
		}
	}
	if _, err := NewZipfian(0, ZipfianConstant); err == nil {
		t.Error("NewZipfian(0) succeeded")
	}
	if _, err := NewZipfian(10, 1); err == nil {
		t.Error("NewZipfian(θ=1) succeeded")
	}
}

// The plain zipfian over 1000 items, θ = 0.99: ranks 1 and 2 are exact,
// the others follow Gray's approximation closely.
func TestZipfianFrequencies(t *testing.T) {
	const n, draws = 1000, 1_000_000
	r := testRand(testSeed(t, 3))
	z, err := NewZipfian(n, ZipfianConstant)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for range draws {
		counts[z.Sample(r.Float64())]++
	}
	t.Logf("ζ(%d, %.2f) = %.6f", n, ZipfianConstant, z.Zeta())
	for _, rank := range []int64{1, 2, 3, 10, 100, 1000} {
		obs := float64(counts[rank-1]) / draws
		theory, gray := z.Prob(rank-1), sampleProb(z, rank-1)
		t.Logf("rank %4d: observed %.5f, zipfian 1/(i^θ ζ) %.5f (ratio %.3f), Gray's closed form %.5f",
			rank, obs, theory, obs/theory, gray)
		if !within(obs, gray, draws, 5) {
			t.Errorf("rank %d: observed %.5f, Gray's closed form gives %.5f", rank, obs, gray)
		}
		if rank == 1 || rank == 2 || rank == 10 || rank == 100 {
			if math.Abs(obs/theory-1) > 0.10 {
				t.Errorf("rank %d: observed %.5f, zipfian %.5f: more than 10%% apart", rank, obs, theory)
			}
		}
	}
	var top, theory, gray float64
	for k := range int64(n / 10) {
		top += float64(counts[k]) / draws
		theory += z.Prob(k)
		gray += sampleProb(z, k)
	}
	t.Logf("top 10%%: observed %.4f, zipfian ζ(100)/ζ(1000) %.4f, Gray's closed form %.4f", top, theory, gray)
	if !within(top, gray, draws, 5) || math.Abs(top-theory) > 0.02 {
		t.Errorf("top 10%% share %.4f, want %.4f (Gray) and within 0.02 of %.4f (zipfian)", top, gray, theory)
	}
	stat, bound := chiSquare(counts, probs(z))
	t.Logf("chi-square against Gray's closed form: %.1f (bound %.1f)", stat, bound)
	if stat > bound {
		t.Errorf("chi-square %.1f > %.1f", stat, bound)
	}
}

func probs(z *Zipfian) []float64 {
	p := make([]float64, z.Items())
	for k := range p {
		p[k] = sampleProb(z, int64(k))
	}
	return p
}

func TestZipfianGrowMatchesNew(t *testing.T) {
	for _, tc := range []struct{ from, to int64 }{
		{1, 2}, {2, 3}, {1000, 1001}, {1000, 1100}, {1000, 1000 + zetaIncrementalLimit + 1}, {10, 5_000_000},
	} {
		g := newZipfian(tc.from, ZipfianConstant, Zeta(tc.from, ZipfianConstant))
		g.Grow(tc.to)
		g.Grow(tc.from) // shrinking is ignored
		f, err := NewZipfian(tc.to, ZipfianConstant)
		if err != nil {
			t.Fatal(err)
		}
		if g.Items() != tc.to || math.Abs(g.zetan-f.zetan) > 1e-10*f.zetan || math.Abs(g.eta-f.eta) > 1e-10 {
			t.Errorf("grow %d→%d: items %d ζ %.15g η %.15g, new: ζ %.15g η %.15g",
				tc.from, tc.to, g.Items(), g.zetan, g.eta, f.zetan, f.eta)
		}
	}
}

// The scrambled zipfian scatters the hot items, and its frequencies are
// those of YCSB's 10^16-item zipfian folded with FNV64 mod n.
func TestScrambledZipfian(t *testing.T) {
	const n, draws, exactRanks = 1000, 1_000_000, 1_000_000
	r := testRand(testSeed(t, 4))
	s, err := NewScrambledZipfian(n)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for range draws {
		k := s.Sample(r.Float64())
		if k < 0 || k >= n {
			t.Fatalf("Sample = %d out of [0, %d)", k, n)
		}
		counts[k]++
	}
	// Expected: the first ranks folded exactly, the rest (each rank far
	// below 1/n) spread evenly.
	want := make([]float64, n)
	var folded float64
	for rank := range int64(exactRanks) {
		p := sampleProb(s.z, rank)
		want[uint64(FNV64(rank))%n] += p
		folded += p
	}
	for k := range want {
		want[k] += (1 - folded) / n
	}
	stat, bound := chiSquare(counts, want)
	if stat > bound {
		t.Errorf("chi-square against folded zipfian %.1f > %.1f", stat, bound)
	}

	hot := hottest(counts, 10)
	if hot[0] != int(uint64(FNV64(0))%n) {
		t.Errorf("hottest item %d, want FNV64(0) mod n = %d", hot[0], uint64(FNV64(0))%n)
	}
	var low int
	for _, k := range hot {
		if k < n/10 {
			low++
		}
	}
	if low == len(hot) {
		t.Errorf("hottest items %v all below %d: not scattered", hot, n/10)
	}
	obs, exp := sortedDesc(counts, draws), slices.Clone(want)
	slices.Sort(exp)
	slices.Reverse(exp)
	plain, err := NewZipfian(n, ZipfianConstant)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		t.Logf("rank %d: observed %.5f, folded zipfian %.5f (plain zipfian over %d: %.5f)", i+1, obs[i], exp[i], n, plain.Prob(int64(i)))
		if !within(obs[i], exp[i], draws, 5) {
			t.Errorf("rank %d: observed %.5f, want %.5f", i+1, obs[i], exp[i])
		}
	}
	var topObs, topExp float64
	for i := range n / 10 {
		topObs += obs[i]
		topExp += exp[i]
	}
	t.Logf("hottest items %v; top 10%% share observed %.4f, expected %.4f", hot, topObs, topExp)
	if math.Abs(topObs-topExp) > 0.01 {
		t.Errorf("top 10%% share %.4f, want %.4f ± 0.01", topObs, topExp)
	}
}

// hottest returns the k items with the most counts, hottest first.
func hottest(counts []int, k int) []int {
	idx := make([]int, len(counts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return counts[b] - counts[a] })
	return idx[:k]
}

// sortedDesc returns the counts as frequencies, in decreasing order.
func sortedDesc(counts []int, total int) []float64 {
	f := make([]float64, len(counts))
	for i, c := range counts {
		f[i] = float64(c) / float64(total)
	}
	slices.Sort(f)
	slices.Reverse(f)
	return f
}

func TestSkewedLatestRange(t *testing.T) {
	r := testRand(testSeed(t, 5))
	l := NewSkewedLatest(0)
	if got := l.Sample(0, 0.5); got != 0 {
		t.Errorf("Sample(newest 0) = %d, want 0", got)
	}
	for newest := int64(1); newest < 3000; newest += 7 {
		for range 50 {
			if k := l.Sample(newest, r.Float64()); k < 1 || k > newest {
				t.Fatalf("Sample(newest %d) = %d, want in [1, %d]", newest, k, newest)
			}
		}
	}
}

func BenchmarkZipfianSample(b *testing.B) {
	z, err := NewZipfian(1_000_000, ZipfianConstant)
	if err != nil {
		b.Fatal(err)
	}
	r := testRand(1)
	b.ReportAllocs()
	for b.Loop() {
		_ = z.Sample(r.Float64())
	}
}

func BenchmarkScrambledZipfianSample(b *testing.B) {
	s, err := NewScrambledZipfian(1_000_000)
	if err != nil {
		b.Fatal(err)
	}
	r := testRand(1)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Sample(r.Float64())
	}
}

func BenchmarkZeta(b *testing.B) {
	for b.Loop() {
		_ = Zeta(100_000_000, ZipfianConstant)
	}
}
