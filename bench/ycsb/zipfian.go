package ycsb

import (
	"fmt"
	"math"
)

// ZipfianConstant is YCSB's zipfian constant θ (ZipfianGenerator.ZIPFIAN_CONSTANT).
const ZipfianConstant = 0.99

// The zipfian behind YCSB's ScrambledZipfianGenerator: ITEM_COUNT = 1e16
// items (min 0, max ITEM_COUNT inclusive) with the precomputed ZETAN.
const (
	scrambledMax   = 10_000_000_000_000_000
	scrambledZetan = 26.46902820178302
)

// zetaExactTerms is how many terms Zeta sums one by one; beyond it the
// Euler–Maclaurin formula gives the rest of the sum (error < 1e-13).
const zetaExactTerms = 1 << 12

// zetaIncrementalLimit is the largest growth that Zipfian.Grow sums term by
// term; a larger one recomputes ζ with Zeta.
const zetaIncrementalLimit = 1 << 14

// Zeta returns ζ(n, θ) = Σ_{i=1..n} 1/i^θ for 0 < θ < 1. It sums the first
// 4096 terms and takes the rest from the Euler–Maclaurin formula, so it costs
// O(1) for any n (YCSB sums all n terms).
func Zeta(n int64, theta float64) float64 {
	if n <= zetaExactTerms {
		return zetaSum(0, n, theta, 0)
	}
	m := float64(zetaExactTerms)
	x := float64(n)
	f := func(v float64) float64 { return math.Pow(v, -theta) }
	d1 := func(v float64) float64 { return -theta * math.Pow(v, -theta-1) }
	d3 := func(v float64) float64 { return -theta * (theta + 1) * (theta + 2) * math.Pow(v, -theta-3) }
	a := 1 - theta
	// ∫_m^n v^-θ dv = (n^a − m^a)/a, written with Expm1 so that it stays
	// accurate as a → 0.
	integral := math.Pow(m, a) * math.Expm1(a*math.Log(x/m)) / a
	// Σ_{i=m+1..n} f(i) = ∫_m^n f + (f(n)−f(m))/2 + (f'(n)−f'(m))/12 − (f'''(n)−f'''(m))/720 + …
	tail := integral + (f(x)-f(m))/2 + (d1(x)-d1(m))/12 - (d3(x)-d3(m))/720
	return zetaSum(0, zetaExactTerms, theta, 0) + tail
}

// zetaSum returns sum + Σ_{i=from+1..to} 1/i^θ.
func zetaSum(from, to int64, theta, sum float64) float64 {
	for i := from + 1; i <= to; i++ {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

// Zipfian is YCSB's ZipfianGenerator: item k of 0..Items()-1 has
// probability about 1/((k+1)^θ ζ(n, θ)), item 0 the most popular. It uses
// the algorithm of Gray et al., "Quickly Generating Billion-Record Synthetic
// Databases" (SIGMOD 1994): items 0 and 1 exactly, the others by a closed
// form that approximates the zipfian. It holds no randomness: Sample maps a
// uniform number to an item. Not safe for concurrent use (Grow mutates).
type Zipfian struct {
	items int64
	theta float64
	alpha float64 // 1/(1−θ)
	zetan float64 // ζ(items, θ)
	zeta2 float64 // ζ(2, θ) = 1 + 0.5^θ
	eta   float64 // (1 − (2/n)^(1−θ)) / (1 − ζ(2, θ)/ζ(n, θ))
}

// NewZipfian returns a zipfian over items ≥ 1 items with constant θ in (0, 1).
func NewZipfian(items int64, theta float64) (*Zipfian, error) {
	if items < 1 {
		return nil, fmt.Errorf("%w: zipfian over %d items", ErrInvalidWorkload, items)
	}
	if !(theta > 0 && theta < 1) {
		return nil, fmt.Errorf("%w: zipfian constant %v not in (0, 1)", ErrInvalidWorkload, theta)
	}
	return newZipfian(items, theta, Zeta(items, theta)), nil
}

func newZipfian(items int64, theta, zetan float64) *Zipfian {
	z := &Zipfian{
		items: items,
		theta: theta,
		alpha: 1 / (1 - theta),
		zetan: zetan,
		zeta2: zetaSum(0, 2, theta, 0),
	}
	z.setEta()
	return z
}

func (z *Zipfian) setEta() {
	if z.items < 3 { // Sample never reaches the closed form
		z.eta = 0
		return
	}
	z.eta = (1 - math.Pow(2/float64(z.items), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

// Items returns the number of items.
func (z *Zipfian) Items() int64 { return z.items }

// Zeta returns ζ(Items(), θ).
func (z *Zipfian) Zeta() float64 { return z.zetan }

// Prob returns the zipfian probability of item k, 1/((k+1)^θ ζ(n, θ)), which
// Sample gives exactly for items 0 and 1 and approximately for the others.
func (z *Zipfian) Prob(k int64) float64 {
	if k < 0 || k >= z.items {
		return 0
	}
	return 1 / (math.Pow(float64(k+1), z.theta) * z.zetan)
}

// Sample maps u in [0, 1) to an item in [0, Items()).
func (z *Zipfian) Sample(u float64) int64 {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.zeta2 {
		return 1
	}
	k := int64(float64(z.items) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(max(k, 0), z.items-1)
}

// Grow extends the zipfian to items items, updating ζ incrementally as
// YCSB's nextLong(itemcount) does; a smaller items is ignored (YCSB's
// default allowitemcountdecrease=false). Unlike YCSB, which keeps η of the
// original item count, Grow recomputes η for the new count.
func (z *Zipfian) Grow(items int64) {
	if items <= z.items {
		return
	}
	if items-z.items <= zetaIncrementalLimit {
		z.zetan = zetaSum(z.items, items, z.theta, z.zetan)
	} else {
		z.zetan = Zeta(items, z.theta)
	}
	z.items = items
	z.setEta()
}

// ScrambledZipfian is YCSB's ScrambledZipfianGenerator: it draws from a
// zipfian over 10^16+1 items (θ = 0.99, YCSB's precomputed ζ) and folds the
// draw onto [0, items) with FNV64(draw) mod items. The popular items are
// thus scattered over the key space, and each item's popularity is the sum
// of those of the zipfian ranks that fold onto it: the hottest item gets
// about 1/ζ(10^16) ≈ 3.8% of the requests (plus ~1/items from the tail),
// not the 1/ζ(items) of a Zipfian over items items.
type ScrambledZipfian struct {
	z     *Zipfian
	items uint64
}

// NewScrambledZipfian returns a scrambled zipfian over items ≥ 1 items.
func NewScrambledZipfian(items int64) (*ScrambledZipfian, error) {
	if items < 1 {
		return nil, fmt.Errorf("%w: scrambled zipfian over %d items", ErrInvalidWorkload, items)
	}
	return &ScrambledZipfian{
		z:     newZipfian(scrambledMax+1, ZipfianConstant, scrambledZetan),
		items: uint64(items),
	}, nil
}

// Items returns the number of items.
func (s *ScrambledZipfian) Items() int64 { return int64(s.items) }

// Sample maps u in [0, 1) to an item in [0, Items()).
func (s *ScrambledZipfian) Sample(u float64) int64 {
	// FNV64 is non-negative except for math.MinInt64, where Java's
	// remainder would go negative; uint64 keeps that case in range.
	return int64(uint64(FNV64(s.z.Sample(u))) % s.items)
}

// SkewedLatest is YCSB's SkewedLatestGenerator: given the newest record
// number newest, it returns newest − Zipfian(newest items), so the newest
// record is the most popular and popularity falls zipfian-like with age. As
// in YCSB, the zipfian is over newest (not newest+1) items, so it returns
// values in [1, newest] and record 0 is never chosen. Not safe for
// concurrent use.
type SkewedLatest struct {
	z *Zipfian
}

// NewSkewedLatest returns a latest generator whose newest record is
// initially newest (Sample grows it as newest rises).
func NewSkewedLatest(newest int64) *SkewedLatest {
	n := max(newest, 1)
	return &SkewedLatest{z: newZipfian(n, ZipfianConstant, Zeta(n, ZipfianConstant))}
}

// Sample maps u in [0, 1) to a record in [1, newest] (newest itself when
// newest < 1), growing the zipfian to newest items first. newest must not
// decrease between calls.
func (l *SkewedLatest) Sample(newest int64, u float64) int64 {
	if newest < 1 {
		return newest
	}
	l.z.Grow(newest)
	k := l.z.Sample(u)
	if k >= newest { // only if newest decreased, against the contract
		k = newest - 1
	}
	return newest - k
}
