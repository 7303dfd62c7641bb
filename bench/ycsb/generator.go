package ycsb

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Op is one generated operation.
type Op struct {
	Kind OpKind
	// Key is the record of a read, update, insert, read-modify-write, or
	// the first record of a scan; empty for OpTxnRead.
	Key string
	// KeyNum is the record number behind Key. For OpInsert, pass it to
	// Counter.Acknowledge once the insert has finished.
	KeyNum int64
	// Keys are the TxnKeys distinct records of an OpTxnRead.
	Keys []string
	// ScanLen is the number of records of an OpScan, in [1, MaxScanLength].
	ScanLen int
	// Value is the FieldLength bytes to write for OpInsert, OpUpdate and
	// OpReadModifyWrite: printable ASCII, fresh for each Op (the caller
	// may keep it).
	Value []byte
}

// The PCG streams of a generator: one for the operations, one for values, so
// that the operation sequence does not depend on FieldLength.
const (
	opStream    = 0x9e3779b97f4a7c15
	valueStream = 0xbf58476d1ce4e5b9
)

// txnAttemptsPerKey bounds the draws for the distinct keys of a transaction
// before the remaining keys are taken as neighbours of the last draw.
const txnAttemptsPerKey = 64

// Generator produces the operations of one client: the kinds in the
// workload's proportions, the records from its request distribution. Given
// a seed, the sequence depends only on the Counter's Limit and NextInsert
// values it observes (with one client and inserts acknowledged in order, on
// the seed alone). A Generator is not safe for concurrent use: create one
// per client goroutine, all sharing one Counter.
type Generator struct {
	w        Workload
	inserted *Counter
	ops      *rand.PCG
	values   *rand.PCG

	// kinds[i] is chosen when a uniform u falls below cum[i] (and not
	// below cum[i-1]); the last cum is 1.
	kinds []OpKind
	cum   []float64

	scrambled *ScrambledZipfian // DistZipfian
	latest    *SkewedLatest     // DistLatest
	hot, cold uint64            // DistHotspot: sizes of the hot and cold sets
}

// NewGenerator returns a generator for w, seeded with seed, drawing insert
// record numbers from inserted, which must have been created with
// NewCounter(w.RecordCount).
func NewGenerator(w Workload, seed uint64, inserted *Counter) (*Generator, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if inserted == nil {
		return nil, errors.New("ycsb: nil insert counter")
	}
	if inserted.Start() != w.RecordCount {
		return nil, fmt.Errorf("%w %q: counter starts at %d, record count is %d",
			ErrInvalidWorkload, w.Name, inserted.Start(), w.RecordCount)
	}
	g := &Generator{
		w:        w,
		inserted: inserted,
		ops:      rand.NewPCG(seed, opStream),
		values:   rand.NewPCG(seed, valueStream),
	}
	var sum float64
	for k := OpRead; k <= OpTxnRead; k++ {
		sum += w.Proportion(k)
	}
	var acc float64
	for k := OpRead; k <= OpTxnRead; k++ { // YCSB's order, then transactions
		if p := w.Proportion(k); p > 0 {
			acc += p
			g.kinds = append(g.kinds, k)
			g.cum = append(g.cum, acc/sum)
		}
	}
	g.cum[len(g.cum)-1] = 1
	switch w.RequestDistribution {
	case DistZipfian:
		// YCSB: ScrambledZipfianGenerator(insertstart, insertstart +
		// insertcount + expectednewkeys), max inclusive.
		expectedNew := int64(float64(w.OperationCount) * w.InsertProportion * 2)
		s, err := NewScrambledZipfian(w.RecordCount + expectedNew + 1)
		if err != nil {
			return nil, err
		}
		g.scrambled = s
	case DistLatest:
		g.latest = NewSkewedLatest(inserted.Limit())
	case DistHotspot:
		g.hot = uint64(float64(w.RecordCount) * w.HotspotDataFraction)
		g.cold = uint64(w.RecordCount) - g.hot
	}
	return g, nil
}

// Workload returns the generator's workload.
func (g *Generator) Workload() Workload { return g.w }

// Next returns the next operation. An OpInsert takes a new record number
// from the Counter; the caller acknowledges it when the insert is done.
func (g *Generator) Next() Op {
	kind := g.nextKind()
	switch kind {
	case OpInsert:
		n := g.inserted.NextInsert()
		return Op{Kind: kind, Key: KeyName(n), KeyNum: n, Value: g.Value()}
	case OpTxnRead:
		return Op{Kind: kind, Keys: g.txnKeys()}
	}
	n := g.NextKeyNum()
	op := Op{Kind: kind, Key: KeyName(n), KeyNum: n}
	switch kind {
	case OpUpdate, OpReadModifyWrite:
		op.Value = g.Value()
	case OpScan:
		op.ScanLen = 1 + int(g.uintn(uint64(g.w.MaxScanLength)))
	}
	return op
}

func (g *Generator) nextKind() OpKind {
	u := g.float64()
	for i, c := range g.cum {
		if u < c {
			return g.kinds[i]
		}
	}
	return g.kinds[len(g.kinds)-1]
}

// NextKeyNum returns the record number of the next request from the
// request distribution, never above the Counter's Limit (YCSB's
// CoreWorkload.nextKeynum).
func (g *Generator) NextKeyNum() int64 {
	switch g.w.RequestDistribution {
	case DistZipfian:
		limit := g.inserted.Limit()
		for {
			if n := g.scrambled.Sample(g.float64()); n <= limit {
				return n
			}
		}
	case DistLatest:
		return g.latest.Sample(g.inserted.Limit(), g.float64())
	case DistHotspot:
		// YCSB's HotspotIntegerGenerator: the hot set is the lowest
		// record numbers.
		if g.cold == 0 || (g.hot > 0 && g.float64() < g.w.HotspotOpnFraction) {
			return int64(g.uintn(g.hot))
		}
		return int64(g.hot + g.uintn(g.cold))
	case DistSingle:
		return 0
	}
	return int64(g.uintn(uint64(g.w.RecordCount))) // DistUniform
}

// txnKeys returns TxnKeys distinct keys from the request distribution.
func (g *Generator) txnKeys() []string {
	nums := make([]int64, 0, g.w.TxnKeys)
	has := func(n int64) bool {
		for _, m := range nums {
			if m == n {
				return true
			}
		}
		return false
	}
	for attempts := 0; len(nums) < g.w.TxnKeys && attempts < txnAttemptsPerKey*g.w.TxnKeys; attempts++ {
		if n := g.NextKeyNum(); !has(n) {
			nums = append(nums, n)
		}
	}
	// Pathologically skewed draws: take the next free record numbers,
	// wrapping within [0, Limit] (Validate ensured TxnKeys <= RecordCount).
	space := g.inserted.Limit() + 1
	for n := nums[len(nums)-1]; len(nums) < g.w.TxnKeys; {
		n = (n + 1) % space
		if !has(n) {
			nums = append(nums, n)
		}
	}
	keys := make([]string, len(nums))
	for i, n := range nums {
		keys[i] = KeyName(n)
	}
	return keys
}

// Value returns a fresh value of FieldLength printable ASCII bytes (' '
// to '_', six random bits each) from the generator's value stream; a
// loader can use it for the load phase.
func (g *Generator) Value() []byte {
	b := make([]byte, g.w.FieldLength)
	for i := 0; i < len(b); {
		x := g.values.Uint64()
		for j := 0; j < 10 && i < len(b); j++ {
			b[i] = ' ' + byte(x&63)
			x >>= 6
			i++
		}
	}
	return b
}

// float64 returns a uniform number in [0, 1) from the operation stream.
func (g *Generator) float64() float64 {
	return float64(g.ops.Uint64()>>11) * 0x1p-53
}

// uintn returns a uniform number in [0, n), n > 0, by Lemire's
// multiply-and-reject method.
func (g *Generator) uintn(n uint64) uint64 {
	hi, lo := bits.Mul64(g.ops.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(g.ops.Uint64(), n)
		}
	}
	return hi
}
