// Package ycsb generates YCSB-style workloads: the operations of benchmark
// clients (kind, key, value, scan length, transaction keys) following the
// definitions of YCSB's CoreWorkload (github.com/brianfrankcooper/YCSB), so
// that Causeway and etcd are driven by the same, recognisable load. It does
// no I/O and reads no clock or global randomness: drivers execute the
// operations and measure them.
//
// # Use
//
// Load records 0..RecordCount-1 (LoadKeys, Generator.Value), then run:
//
//	w, _ := ycsb.Core("A")
//	w.RecordCount, w.OperationCount = 1_000_000, 10_000_000
//	inserted := ycsb.NewCounter(w.RecordCount) // shared by all clients
//	for i := range clients {
//		g, err := ycsb.NewGenerator(w, seed+uint64(i), inserted) // one per client goroutine
//		...
//		for {
//			op := g.Next()
//			... execute op ...
//			if op.Kind == ycsb.OpInsert {
//				inserted.Acknowledge(op.KeyNum) // after the insert, whatever its outcome
//			}
//		}
//	}
//
// A Generator belongs to one goroutine; the Counter is shared and safe for
// concurrent use. Each operation's kind is drawn independently with the
// workload's proportions, then its record from the request distribution.
// A generator is deterministic: the same seed and the same Counter values
// observed give the same operations (and values: they come from a second
// stream of the seed, so the value size does not change the operations).
//
// # Workloads
//
// Core returns YCSB's core workloads as workloads/workload[a-f] define them:
//
//	name  read  update  insert  scan  read-modify-write  distribution  YCSB's example
//	A     50%   50%                                      zipfian       session store
//	B     95%    5%                                      zipfian       photo tagging
//	C    100%                                            zipfian       user profile cache
//	D     95%            5%                              latest        user status updates
//	E                    5%     95%                      zipfian       threaded conversations (scans of 1..100)
//	F     50%                          50%               zipfian       user database
//
// ChainReactionMixes returns the mixes of the ChainReaction evaluation:
// on one hot key (DistSingle) with update/read percentages 50/50, 25/75,
// 10/90, 5/95, 0/100 ("hot-50-50" .. "hot-0-100"), and zipfian mixes with
// read-only transactions of TxnKeys (5) keys, update/read/transaction
// 10/85/5, 5/90/5, 0/95/5 ("txn-10-85-5" ..).
//
// Records are YCSB's: record n has key KeyName(n) = "user" + decimal
// FNV64(n) (insertorder=hashed; KeyName(0) is "user6284781860667377211", as
// in YCSB), so key order is unrelated to insertion order and a scan reads
// the ScanLen records that follow a key in key order. A record's value is
// FieldLength (default 1024; YCSB uses 10 fields × 100 bytes) random printable
// bytes; every insert, update and read-modify-write writes a whole value
// (YCSB's default update rewrites one field of a multi-field record).
//
// # Request distributions
//
//   - zipfian: ScrambledZipfian over RecordCount + 2·OperationCount·
//     InsertProportion + 1 items, a draw above Counter.Limit drawn again
//     (YCSB sizes the space for the expected inserts so that they do not
//     move the hot keys).
//   - latest: SkewedLatest over Counter.Limit, the newest acknowledged
//     record the most popular.
//   - uniform: uniform over the loaded records 0..RecordCount-1.
//   - hotspot: HotspotOpnFraction (0.8) of the requests uniform over the
//     lowest HotspotDataFraction (0.2) of the loaded records, the rest
//     uniform over the others.
//   - single: record 0 only (not YCSB).
//
// # Generators
//
// Zipfian is YCSB's ZipfianGenerator, the algorithm of Gray et al.,
// "Quickly Generating Billion-Record Synthetic Databases" (SIGMOD 1994),
// with θ = ZipfianConstant = 0.99 and ζ(n, θ) = Σ_{i=1..n} i^-θ
// precomputed (Zeta; exact for the first 4096 terms, Euler–Maclaurin for
// the rest, so ζ of a billion items takes a fifth of a millisecond, not the
// seconds of YCSB's full sum). Item 0 has
// probability 1/ζ(n) and item 1 0.5^θ/ζ(n) exactly; the others follow a
// closed form that approximates 1/((k+1)^θ ζ(n)) (e.g. for n = 1000: +17% at
// rank 3, +1% at rank 10, −4% at rank 100). Zipfian.Sample maps a uniform
// u in [0, 1) to an item; the Generator supplies u.
//
// ScrambledZipfian is YCSB's ScrambledZipfianGenerator: a zipfian draw from
// 10^16+1 items folded onto n items by FNV64(draw) mod n, which scatters
// the hot items over the key space. YCSB's constant ζ for it, 26.469...,
// is ζ(10^10, 0.99), left from when the item count was 10^10; we keep both
// constants, as YCSB does, so the hottest of n items gets ≈ 1/26.47 ≈ 3.8%
// of the requests plus its share of the tail (≈ 1/n), whatever n: a flatter
// head than a Zipfian over n items (12.9% for n = 1000).
//
// SkewedLatest is YCSB's SkewedLatestGenerator: newest − Zipfian(newest
// items), with newest = Counter.Limit; the zipfian grows incrementally as
// records are inserted. As in YCSB, record 0 is never chosen. Unlike YCSB,
// growth also recomputes the zipfian's η for the new item count.
//
// Counter is YCSB's AcknowledgedCounterGenerator: NextInsert hands out
// record numbers from RecordCount on, and Limit, the highest record number
// below which every insert is acknowledged, advances only over contiguous
// acknowledgments, so no read asks for a record whose insert is still under
// way or was overtaken by a later one.
//
// Not provided: YCSB's exponential and sequential distributions,
// insertstart/insertcount, ordered inserts, zero padding, zipfian scan
// lengths, multiple fields and field-level reads and updates.
package ycsb
