package plot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsbrun"
)

func TestWritePNG(t *testing.T) {
	r := &ycsbrun.Report{Title: "test", Setup: ycsbrun.Setup{Workloads: []string{"A", "C"}}}
	for _, m := range []string{drivers.ModeCausewayCausal, drivers.ModeEtcdSer} {
		for i, c := range []int{1, 16, 64} {
			for _, w := range []string{"C", "A", "hot-50-50"} {
				r.Results = append(r.Results, ycsbrun.Result{Mode: m, Workload: w, Clients: c, Throughput: float64(1000 * (i + 1))})
			}
		}
	}
	plots, err := Throughput(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 3 || plots[0].Title.Text != "YCSB-A" || plots[1].Title.Text != "YCSB-C" || plots[2].Title.Text != "hot-50-50" {
		t.Fatalf("panels: %d", len(plots))
	}
	path := filepath.Join(t.TempDir(), "p.png")
	if err := WritePNG(r, path); err != nil {
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
