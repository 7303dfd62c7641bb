package plot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsbrun"
)

// report has two rounds of each point, 20% below and above the median
// 1000, 2000, 3000 ops/s at 1, 16 and 64 clients.
func report() *ycsbrun.Report {
	r := &ycsbrun.Report{Title: "test", Setup: ycsbrun.Setup{Workloads: []string{"A", "C"}}}
	for _, m := range []string{drivers.ModeCausewayCausal, drivers.ModeEtcdSer} {
		for i, c := range []int{1, 16, 64} {
			for _, w := range []string{"C", "A", "hot-50-50"} {
				for round, f := range []float64{0.8, 1.2} {
					r.Results = append(r.Results, ycsbrun.Result{Mode: m, Workload: w, Round: round + 1,
						Measurement: core.Measurement{Clients: c, Throughput: f * float64(1000*(i+1))}})
				}
			}
		}
	}
	return r
}

func TestThroughputPanels(t *testing.T) {
	plots, err := Throughput(report())
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 3 || plots[0].Title.Text != "YCSB-A" || plots[1].Title.Text != "YCSB-C" || plots[2].Title.Text != "hot-50-50" {
		t.Fatalf("panels: %d", len(plots))
	}
	// The error bars reach the highest round (3600), and the axis has
	// room above it for the legend; medians alone would end at 3000.
	if got := plots[0].Y.Max; got < 3600*1.25-1 {
		t.Errorf("y axis ends at %.0f: the error bars up to 3600 are not drawn", got)
	}
	// One round: no error bars, the axis fits the medians.
	one := report()
	one.Results = one.Results[:0]
	for _, res := range report().Results {
		if res.Round == 2 {
			one.Results = append(one.Results, res)
		}
	}
	plots, err = Throughput(one)
	if err != nil {
		t.Fatal(err)
	}
	if got := plots[0].Y.Max; got != 3600*1.25 {
		t.Errorf("y axis ends at %.0f, want 4500", got)
	}
}

func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	if err := WritePNG(report(), path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
		t.Errorf("not a PNG (%d bytes)", len(b))
	}
	if err := WritePNG(&ycsbrun.Report{}, path); err == nil {
		t.Error("empty report plotted")
	}
}
