package ycsb

import (
	"flag"
	"math"
	"math/rand/v2"
	"testing"
)

var seedFlag = flag.Uint64("ycsb.seed", 0, "seed of the randomized tests (0: each test's fixed seed)")

// testSeed returns def, or the -ycsb.seed flag when set, and logs it if the
// test fails so that the run can be repeated.
func testSeed(t testing.TB, def uint64) uint64 {
	t.Helper()
	s := def
	if *seedFlag != 0 {
		s = *seedFlag
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (repeat with -ycsb.seed=%d)", s, s)
		}
	})
	return s
}

// testRand returns a test's own random source.
func testRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// chiSquare returns Pearson's statistic of the observed counts against the
// expected probabilities, and the bound a correct distribution stays under
// (the mean plus six standard deviations of the chi-square distribution).
func chiSquare(obs []int, probs []float64) (stat, bound float64) {
	var total int
	for _, o := range obs {
		total += o
	}
	df := -1
	for i, p := range probs {
		if p == 0 {
			continue
		}
		e := p * float64(total)
		d := float64(obs[i]) - e
		stat += d * d / e
		df++
	}
	return stat, float64(df) + 6*math.Sqrt(2*float64(df))
}

// within reports whether an observed frequency from n draws is within k
// standard deviations of the probability p.
func within(obs, p float64, n int, k float64) bool {
	return math.Abs(obs-p) <= k*math.Sqrt(p*(1-p)/float64(n))
}

// sampleProb returns the probability that z.Sample(u) returns item k for u
// uniform in [0, 1): Gray et al.'s closed form inverted. For k ≥ 2 Sample
// returns k when k ≤ n(ηu−η+1)^α < k+1, i.e. for u in [u(k), u(k+1)) with
// u(x) = 1 − (1 − (x/n)^(1−θ))/η.
func sampleProb(z *Zipfian, k int64) float64 {
	switch {
	case k < 0 || k >= z.items:
		return 0
	case k == 0:
		return math.Min(1, 1/z.zetan)
	case k == 1:
		return (z.zeta2 - 1) / z.zetan
	}
	a := 1 - z.theta
	n := float64(z.items)
	x := float64(k)
	if k == z.items-1 { // the clamp collects u(n−1)..1
		return (1 - math.Pow(x/n, a)) / z.eta
	}
	// ((k+1)^a − k^a) n^−a / η, without cancellation
	return math.Pow(x/n, a) * math.Expm1(a*math.Log1p(1/x)) / z.eta
}
