package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/bench/ycsbrun"
)

// TestRunFloorsReport drives the three commands against the in-memory
// system: a quick run, the floors, and a merged report with its outputs.
func TestRunFloorsReport(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	runJSON := filepath.Join(dir, "run.json")
	err := run(ctx, []string{"run", "--modes", "memory", "--workloads", "A,hot-50-50", "--records", "200", "--clients", "1,2",
		"--duration", "100ms", "--warmup", "20ms", "--progress", "0", "--json", runJSON, "--out", filepath.Join(dir, "run.md")}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	r, err := ycsbrun.ReadReport(runJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 4 || len(r.Loads) != 1 || r.Loads[0].Loaded != 200 || r.Setup.Warmup != "20ms" {
		t.Fatalf("run report: %d results, loads %+v, setup %+v", len(r.Results), r.Loads, r.Setup)
	}
	// A second round of the same run.
	run2JSON := filepath.Join(dir, "run2.json")
	err = run(ctx, []string{"run", "--round", "2", "--modes", "memory", "--workloads", "A,hot-50-50", "--records", "200", "--clients", "1,2",
		"--duration", "100ms", "--warmup", "20ms", "--progress", "0", "--json", run2JSON}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run round 2: %v\n%s", err, stderr.String())
	}
	floorsJSON := filepath.Join(dir, "floors.json")
	if err := run(ctx, []string{"floors", "--dir", dir, "--fsync-samples", "10", "--echo-samples", "10", "--json", floorsJSON}, &stdout, &stderr); err != nil {
		t.Fatalf("floors: %v", err)
	}
	md, png := filepath.Join(dir, "c.md"), filepath.Join(dir, "c.png")
	cJSON := filepath.Join(dir, "c.json")
	if err := run(ctx, []string{"report", "--in", floorsJSON + "," + runJSON + "," + run2JSON, "--out", md, "--plot", png, "--json", cJSON, "--note", "hello"}, &stdout, &stderr); err != nil {
		t.Fatalf("report: %v", err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Floors", "## Targets", "not measured", "hot-50-50", "- hello", "- 2 rounds", "## Throughput per round", "| A | 2 | memory | 2 |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
	c, err := ycsbrun.ReadReport(cJSON)
	if err != nil {
		t.Fatal(err)
	}
	if c.Setup.Rounds != 2 || len(c.Results) != 8 || len(c.Points) != 4 || c.Points[0].Rounds != 2 || c.Points[0].Throughput.N != 2 {
		t.Errorf("merged report: rounds %d, %d results, %d points %+v", c.Setup.Rounds, len(c.Results), len(c.Points), c.Points)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--modes", "mongo"},
		{"run", "--workloads", "Z"},
		{"run", "--clients", "0"},
		{"run", "--duration", "0"},
		{"report"},
		{"nope"},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
