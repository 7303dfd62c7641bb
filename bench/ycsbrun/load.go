package ycsbrun

import (
	"context"
	"errors"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// LoadConfig configures the load phase: LoadSpec's records, inserted as
// record numbers 0..Records-1 (ycsb.KeyName).
type LoadConfig struct {
	// ValueSize is the size of each value in bytes.
	ValueSize int
	// Seed determines the values: record n's value depends only on Seed
	// and n (RecordValue), so every system gets the same bytes whatever
	// the concurrency.
	Seed uint64
	core.LoadSpec
}

// LoadResult is the outcome of the load phase.
type LoadResult = core.LoadResult

// valueSeedMix separates the per-record value seeds from the run seeds.
const valueSeedMix = 0x6c6f61642d76616c // "load-val"

// RecordValue returns the load-phase value of record n: size printable
// bytes from a ycsb generator seeded with a mix of seed and n.
func RecordValue(seed uint64, n int64, size int) []byte {
	w := ycsb.Workload{Name: "load", ReadProportion: 1, RequestDistribution: ycsb.DistUniform,
		RecordCount: 1, FieldLength: size}
	g, err := ycsb.NewGenerator(w, (seed^valueSeedMix)+uint64(n)*0x9e3779b97f4a7c15, ycsb.NewCounter(1))
	if err != nil {
		panic(err) // the workload above is valid
	}
	return g.Value()
}

// Load inserts cfg.Records records through sys's drivers (core.Load).
func Load(ctx context.Context, sys drivers.System, cfg LoadConfig) (LoadResult, error) {
	if cfg.ValueSize < 0 {
		return LoadResult{}, errors.New("ycsbrun: negative value size")
	}
	var drvs []drivers.Driver
	defer func() {
		for _, d := range drvs {
			d.Close()
		}
	}()
	spec := cfg.LoadSpec
	spec.Label = sys.Mode()
	res, err := core.Load(ctx, spec,
		func(worker int) (core.Inserter, error) {
			d, err := sys.Driver(worker)
			if err != nil {
				return nil, err
			}
			drvs = append(drvs, d)
			return func(ctx context.Context, n int64) error {
				return d.Insert(ctx, ycsb.KeyName(n), RecordValue(cfg.Seed, n, cfg.ValueSize))
			}, nil
		})
	res.ValueSize = cfg.ValueSize
	return res, err
}
