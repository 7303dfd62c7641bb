// Package ycsbrun runs YCSB workloads (package bench/ycsb) against a system
// through a driver (package bench/drivers) on the measurement library
// (package bench/core): the load phase, timed run phases with a warm-up
// that is not measured, latency histograms per operation kind, error
// counts, and their rendering as JSON and markdown, including the
// Causeway/etcd comparison over repeated rounds with its targets. The
// measurement rules are core's.
package ycsbrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// RunConfig configures one run phase: one workload, one client count.
type RunConfig struct {
	// Workload is the operation mix, with RecordCount (the loaded records)
	// and FieldLength (the value size) set.
	Workload ycsb.Workload
	// Clients is the number of client goroutines (>= 1).
	Clients int
	// Seed is the base seed: client i's generator is seeded with Seed+i.
	Seed uint64
	// Round numbers the repetition of the run (0 when not repeated).
	Round int
	// PhaseSpec is the timing, pacing and progress of the phase (its
	// Kinds are the ycsb operation kinds).
	core.PhaseSpec
}

// Result is the outcome of one run phase.
type Result struct {
	Mode      string `json:"mode"`
	System    string `json:"system"`
	Workload  string `json:"workload"`
	Records   int64  `json:"records"`
	ValueSize int    `json:"value_size"`
	// Round is the repetition this result belongs to, from 1 (0 when the
	// run was not repeated; MergeReports numbers such results).
	Round int `json:"round,omitempty"`
	core.Measurement
	// ServerMetrics are the server histograms observed during the phase
	// (warm-up included), when the runner was given metrics URLs.
	ServerMetrics []core.HistDelta `json:"server_metrics,omitempty"`
}

// opKinds names the operation kinds, indexed by ycsb.OpKind.
var opKinds = func() []string {
	out := make([]string, ycsb.OpTxnRead+1)
	for k := range out {
		out[k] = ycsb.OpKind(k).String()
	}
	return out
}()

// ErrorClass names the class of an operation error for the error counts:
// not_found and conflict for the drivers' errors, otherwise
// core.ErrorClass (timeout, canceled, a gRPC code, other).
func ErrorClass(err error) string { return core.ErrorClass(tag(err)) }

// tag marks the drivers' errors with their class.
func tag(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, drivers.ErrNotFound):
		return core.KindError("not_found", err)
	case errors.Is(err, drivers.ErrConflict):
		return core.KindError("conflict", err)
	}
	return err
}

// Execute runs one operation on d. A read-modify-write is one operation
// (its latency covers the read and the write); an insert acknowledges its
// record number in inserted whatever its outcome.
func Execute(ctx context.Context, d drivers.Driver, op ycsb.Op, inserted *ycsb.Counter) error {
	switch op.Kind {
	case ycsb.OpRead:
		_, err := d.Read(ctx, op.Key)
		return err
	case ycsb.OpUpdate:
		return d.Update(ctx, op.Key, op.Value)
	case ycsb.OpInsert:
		err := d.Insert(ctx, op.Key, op.Value)
		if inserted != nil {
			_ = inserted.Acknowledge(op.KeyNum)
		}
		return err
	case ycsb.OpScan:
		_, err := d.Scan(ctx, op.Key, op.ScanLen)
		return err
	case ycsb.OpReadModifyWrite:
		return d.ReadModifyWrite(ctx, op.Key, op.Value)
	case ycsb.OpTxnRead:
		return d.TxnRead(ctx, op.Keys)
	}
	return fmt.Errorf("ycsbrun: unknown operation kind %v", op.Kind)
}

// client is one client goroutine: its generator and driver.
type client struct {
	g        *ycsb.Generator
	d        drivers.Driver
	inserted *ycsb.Counter
	op       ycsb.Op
}

func (c *client) Next() int {
	c.op = c.g.Next()
	return int(c.op.Kind)
}

func (c *client) Do(ctx context.Context) error {
	return tag(Execute(ctx, c.d, c.op, c.inserted))
}

// Skip acknowledges an insert that was generated but never sent, so that
// the readers of the newest records do not wait for it.
func (c *client) Skip() {
	if c.op.Kind == ycsb.OpInsert {
		_ = c.inserted.Acknowledge(c.op.KeyNum)
	}
}

// Run executes one run phase of cfg.Workload with cfg.Clients client
// goroutines, each with a driver of sys and its own generator (see
// core.RunPhase).
func Run(ctx context.Context, sys drivers.System, cfg RunConfig) (Result, error) {
	w := cfg.Workload
	if cfg.Clients < 1 {
		return Result{}, errors.New("ycsbrun: clients must be at least 1")
	}
	if w.OperationCount <= 0 {
		// Only sizes the zipfian space for inserts (see ycsb.Workload).
		w.OperationCount = max(cfg.Operations, w.RecordCount)
	}
	inserted := ycsb.NewCounter(w.RecordCount)
	clients := make([]core.Client, cfg.Clients)
	for i := range clients {
		g, err := ycsb.NewGenerator(w, cfg.Seed+uint64(i), inserted)
		if err != nil {
			return Result{}, err
		}
		d, err := sys.Driver(i)
		if err != nil {
			return Result{}, fmt.Errorf("ycsbrun: driver %d: %w", i, err)
		}
		defer d.Close()
		clients[i] = &client{g: g, d: d, inserted: inserted}
	}
	spec := cfg.PhaseSpec
	spec.Kinds = opKinds
	m, err := core.RunPhase(ctx, spec, clients)
	res := Result{Mode: sys.Mode(), System: drivers.SystemOf(sys.Mode()), Workload: w.Name,
		Records: w.RecordCount, ValueSize: w.FieldLength, Round: cfg.Round, Measurement: m}
	return res, err
}
