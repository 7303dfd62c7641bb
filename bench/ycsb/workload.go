package ycsb

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// OpKind is the kind of one generated operation.
type OpKind int

// The operation kinds. The string forms of the YCSB kinds are YCSB's
// measurement labels.
const (
	// OpRead reads one record (Op.Key).
	OpRead OpKind = iota + 1
	// OpUpdate overwrites one existing record (Op.Key) with Op.Value.
	OpUpdate
	// OpInsert writes a new record (Op.Key, Op.Value); the driver must
	// call Counter.Acknowledge(Op.KeyNum) once the insert has finished.
	OpInsert
	// OpScan reads Op.ScanLen records in key order starting at Op.Key.
	OpScan
	// OpReadModifyWrite reads one record (Op.Key), then writes Op.Value to it.
	OpReadModifyWrite
	// OpTxnRead reads the records Op.Keys together, as one read-only
	// transaction (ChainReaction's GetTxn). It is not a YCSB kind.
	OpTxnRead
)

// numKinds is the number of OpKinds; kinds index arrays by kind-1.
const numKinds = int(OpTxnRead)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "READ"
	case OpUpdate:
		return "UPDATE"
	case OpInsert:
		return "INSERT"
	case OpScan:
		return "SCAN"
	case OpReadModifyWrite:
		return "READ-MODIFY-WRITE"
	case OpTxnRead:
		return "TXN-READ"
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// The request distributions: how the record of a read, update, scan,
// read-modify-write or transaction key is chosen.
const (
	// DistUniform picks uniformly among the loaded records 0..RecordCount-1
	// (YCSB's UniformLongGenerator; inserted records are never chosen).
	DistUniform = "uniform"
	// DistZipfian is YCSB's "zipfian": a ScrambledZipfian over
	// RecordCount+2*OperationCount*InsertProportion+1 items; a choice
	// beyond the acknowledged limit is drawn again.
	DistZipfian = "zipfian"
	// DistLatest is YCSB's "latest" (SkewedLatestGenerator): zipfian over
	// the age of records, the newest acknowledged record the most popular.
	DistLatest = "latest"
	// DistHotspot is YCSB's "hotspot": a fraction HotspotOpnFraction of
	// the requests go uniformly to the lowest HotspotDataFraction of the
	// loaded record numbers, the rest uniformly to the others.
	DistHotspot = "hotspot"
	// DistSingle sends every request to record 0 (one hot key). Not YCSB.
	DistSingle = "single"
)

// Defaults of YCSB's CoreWorkload and its workload files.
const (
	// DefaultRecordCount is the recordcount of YCSB's workload files.
	DefaultRecordCount = 1000
	// DefaultOperationCount is the operationcount of YCSB's workload files.
	DefaultOperationCount = 1000
	// DefaultFieldLength is the size of a record's value in bytes: 1 KiB,
	// about YCSB's default record (10 fields of 100 bytes) held as one
	// value.
	DefaultFieldLength = 1024
	// DefaultMaxScanLength is YCSB's maxscanlength default (workload E sets 100).
	DefaultMaxScanLength = 1000
	// DefaultTxnKeys is the number of keys of a GetTxn.
	DefaultTxnKeys = 5
	// DefaultHotspotDataFraction is YCSB's hotspotdatafraction default.
	DefaultHotspotDataFraction = 0.2
	// DefaultHotspotOpnFraction is YCSB's hotspotopnfraction default.
	DefaultHotspotOpnFraction = 0.8
)

// Errors returned by this package.
var (
	// ErrInvalidWorkload is wrapped by Workload.Validate's errors.
	ErrInvalidWorkload = errors.New("ycsb: invalid workload")
	// ErrUnknownWorkload is returned by Core and Lookup for a name they
	// do not know.
	ErrUnknownWorkload = errors.New("ycsb: unknown workload")
)

// proportionTolerance is how far from 1 the proportions may sum.
const proportionTolerance = 1e-6

// Workload describes an operation mix, YCSB CoreWorkload style. The zero
// value is not valid; start from Core or ChainReactionMixes and adjust.
type Workload struct {
	// Name identifies the workload in reports ("A".."F", "hot-50-50", ...).
	Name string

	// The proportions of each operation kind; each in [0, 1], summing to 1
	// (within 1e-6). Kinds are drawn independently for each operation.
	ReadProportion   float64
	UpdateProportion float64
	InsertProportion float64
	ScanProportion   float64
	RMWProportion    float64
	TxnProportion    float64

	// RequestDistribution is one of DistUniform, DistZipfian, DistLatest,
	// DistHotspot, DistSingle.
	RequestDistribution string

	// RecordCount is the number of records of the load phase (record
	// numbers 0..RecordCount-1); inserts continue from RecordCount. >= 1.
	RecordCount int64
	// OperationCount is the number of operations of the whole run phase,
	// all clients together. Only DistZipfian uses it, as YCSB does: with
	// inserts, the zipfian key space is sized for 2*OperationCount*
	// InsertProportion new records so that inserts do not move the hot
	// keys; draws beyond the inserted records are drawn again, so an
	// OperationCount far above the real run slows generation. >= 0.
	OperationCount int64
	// FieldLength is the size in bytes of the value written by an
	// insert, update or read-modify-write. >= 0.
	FieldLength int
	// MaxScanLength bounds the length of a scan, drawn uniformly from
	// [1, MaxScanLength]. >= 1 when ScanProportion > 0.
	MaxScanLength int
	// TxnKeys is the number of distinct keys of a transaction read.
	// In [1, RecordCount] when TxnProportion > 0 (1 with DistSingle).
	TxnKeys int
	// HotspotDataFraction is the fraction of the records in the hot set
	// (DistHotspot only), in [0, 1].
	HotspotDataFraction float64
	// HotspotOpnFraction is the fraction of requests that go to the hot
	// set (DistHotspot only), in [0, 1].
	HotspotOpnFraction float64
}

// Proportion returns the configured proportion of kind k.
func (w Workload) Proportion(k OpKind) float64 {
	switch k {
	case OpRead:
		return w.ReadProportion
	case OpUpdate:
		return w.UpdateProportion
	case OpInsert:
		return w.InsertProportion
	case OpScan:
		return w.ScanProportion
	case OpReadModifyWrite:
		return w.RMWProportion
	case OpTxnRead:
		return w.TxnProportion
	}
	return 0
}

// Validate reports the first problem of w, wrapping ErrInvalidWorkload.
func (w Workload) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidWorkload, w.Name, fmt.Sprintf(format, args...))
	}
	var sum float64
	for k := OpRead; k <= OpTxnRead; k++ {
		p := w.Proportion(k)
		if math.IsNaN(p) || p < 0 || p > 1 {
			return bad("%s proportion %v not in [0, 1]", k, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > proportionTolerance {
		return bad("proportions sum to %v, not 1", sum)
	}
	if w.RecordCount < 1 {
		return bad("record count %d < 1", w.RecordCount)
	}
	if w.OperationCount < 0 {
		return bad("operation count %d < 0", w.OperationCount)
	}
	if w.FieldLength < 0 {
		return bad("field length %d < 0", w.FieldLength)
	}
	switch w.RequestDistribution {
	case DistUniform, DistZipfian, DistLatest, DistSingle:
	case DistHotspot:
		for _, f := range []float64{w.HotspotDataFraction, w.HotspotOpnFraction} {
			if math.IsNaN(f) || f < 0 || f > 1 {
				return bad("hotspot fraction %v not in [0, 1]", f)
			}
		}
	default:
		return bad("unknown request distribution %q", w.RequestDistribution)
	}
	if w.ScanProportion > 0 && w.MaxScanLength < 1 {
		return bad("max scan length %d < 1", w.MaxScanLength)
	}
	if w.TxnProportion > 0 {
		if w.TxnKeys < 1 || int64(w.TxnKeys) > w.RecordCount {
			return bad("txn keys %d not in [1, record count %d]", w.TxnKeys, w.RecordCount)
		}
		if w.RequestDistribution == DistSingle && w.TxnKeys != 1 {
			return bad("txn keys %d > 1 with a single hot key", w.TxnKeys)
		}
	}
	return nil
}

// base returns a workload with YCSB's defaults and no operations.
func base(name, dist string) Workload {
	return Workload{
		Name:                name,
		RequestDistribution: dist,
		RecordCount:         DefaultRecordCount,
		OperationCount:      DefaultOperationCount,
		FieldLength:         DefaultFieldLength,
		MaxScanLength:       DefaultMaxScanLength,
		TxnKeys:             DefaultTxnKeys,
		HotspotDataFraction: DefaultHotspotDataFraction,
		HotspotOpnFraction:  DefaultHotspotOpnFraction,
	}
}

// CoreNames are the names of YCSB's core workloads, in order.
var CoreNames = []string{"A", "B", "C", "D", "E", "F"}

// Core returns YCSB's core workload name ("A".."F"; also "a" or
// "workloada"), as its workloads/workload[a-f] files define it, with
// RecordCount and OperationCount 1000 as there: set them for the run.
func Core(name string) (Workload, error) {
	n := strings.ToUpper(strings.TrimPrefix(strings.ToLower(name), "workload"))
	var w Workload
	switch n {
	case "A": // update heavy
		w = base(n, DistZipfian)
		w.ReadProportion, w.UpdateProportion = 0.5, 0.5
	case "B": // read mostly
		w = base(n, DistZipfian)
		w.ReadProportion, w.UpdateProportion = 0.95, 0.05
	case "C": // read only
		w = base(n, DistZipfian)
		w.ReadProportion = 1
	case "D": // read latest
		w = base(n, DistLatest)
		w.ReadProportion, w.InsertProportion = 0.95, 0.05
	case "E": // short ranges
		w = base(n, DistZipfian)
		w.ScanProportion, w.InsertProportion = 0.95, 0.05
		w.MaxScanLength = 100
	case "F": // read-modify-write
		w = base(n, DistZipfian)
		w.ReadProportion, w.RMWProportion = 0.5, 0.5
	default:
		return Workload{}, fmt.Errorf("%w: %q", ErrUnknownWorkload, name)
	}
	return w, nil
}

// ChainReactionMixes returns the mixes of the ChainReaction evaluation, in
// order: single-hot-key mixes named "hot-W-R" (W% updates, R% reads, every
// request on record 0), then zipfian mixes with transactions named
// "txn-W-R-T" (W% updates, R% reads, T% transaction reads of TxnKeys keys).
func ChainReactionMixes() []Workload {
	var ws []Workload
	for _, m := range []struct{ w, r int }{{50, 50}, {25, 75}, {10, 90}, {5, 95}, {0, 100}} {
		w := base(fmt.Sprintf("hot-%d-%d", m.w, m.r), DistSingle)
		w.UpdateProportion, w.ReadProportion = float64(m.w)/100, float64(m.r)/100
		ws = append(ws, w)
	}
	for _, m := range []struct{ w, r, t int }{{10, 85, 5}, {5, 90, 5}, {0, 95, 5}} {
		w := base(fmt.Sprintf("txn-%d-%d-%d", m.w, m.r, m.t), DistZipfian)
		w.UpdateProportion = float64(m.w) / 100
		w.ReadProportion = float64(m.r) / 100
		w.TxnProportion = float64(m.t) / 100
		ws = append(ws, w)
	}
	return ws
}

// Lookup returns the core workload or ChainReaction mix called name.
func Lookup(name string) (Workload, error) {
	if w, err := Core(name); err == nil {
		return w, nil
	}
	for _, w := range ChainReactionMixes() {
		if w.Name == name {
			return w, nil
		}
	}
	return Workload{}, fmt.Errorf("%w: %q", ErrUnknownWorkload, name)
}
