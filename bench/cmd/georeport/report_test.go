package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFixture writes measurements of three sites at 50 ms as geobench
// and ycsb would.
func writeFixture(t *testing.T, dir string, causewayVisP99 float64) {
	t.Helper()
	put := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"s1", "s2", "s3"}
	members := []string{"e1", "e2", "e3"}
	for i := range 3 {
		order := []int{i, (i + 1) % 3, (i + 2) % 3}
		cw := geobench{System: "causeway", Keyspace: "default", Puts: stats{N: 200, MinMs: 0.8, P50Ms: 1.5, P99Ms: 7}}
		et := geobench{System: "etcd", Leader: "e3", Puts: stats{N: 200, MinMs: 200, P50Ms: 206, P99Ms: 210}}
		for k, j := range order {
			cw.Names = append(cw.Names, names[j])
			cw.Chain = append(cw.Chain, names[j])
			et.Names = append(et.Names, members[j])
			if k > 0 {
				cw.Visibility = append(cw.Visibility, visibility{Name: names[j], Position: k, Delay: stats{N: 200, P50Ms: 50*float64(k) + 10, P99Ms: causewayVisP99 * float64(k)}})
				et.Visibility = append(et.Visibility, visibility{Name: members[j], Delay: stats{N: 200, P50Ms: 157, P99Ms: 161}})
			}
		}
		single := geobench{System: "causeway", Keyspace: "geobench-single-" + names[i], Names: []string{names[i]}, Puts: stats{N: 200, P50Ms: 1.4, P99Ms: 6}}
		put(fmt.Sprintf("causeway-put-s%d.json", i+1), cw)
		put(fmt.Sprintf("etcd-put-s%d.json", i+1), et)
		put(fmt.Sprintf("causeway-single-s%d.json", i+1), single)
		local := geobench{System: "causeway", Keyspace: "default", Names: []string{names[i]}, Puts: stats{N: 200, P50Ms: 1.54, P99Ms: 6.5}}
		put(fmt.Sprintf("causeway-local-s%d.json", i+1), local)
		y := func(mode string, ops float64) map[string]any {
			return map[string]any{
				"setup": map[string]any{"records": 1000, "duration": "8s"},
				"results": []map[string]any{{"mode": mode, "workload": "B", "clients": 16, "throughput_ops": ops, "errors": 0,
					"latency": map[string]any{"p50_ms": 2.5, "p99_ms": 14.0}}},
			}
		}
		put(fmt.Sprintf("causeway-ycsb-s%d.json", i+1), y("causeway-causal", 4600))
		put(fmt.Sprintf("etcd-ycsb-s%d.json", i+1), y("etcd-ser", 1500))
		put(fmt.Sprintf("causeway-ycsb-all-s%d.json", i+1), y("causeway-causal", 2000))
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir, 60)
	r, err := load(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Delay = 50 * time.Millisecond
	r.Title = "test"
	var b strings.Builder
	if err := r.writeMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| s1 | 1.50 / 7.00 | 206 / 210 e1 (follower) | 4600 | 1500 |",
		"| s3 | 1.40 / 6.00 | 1.54 / 6.50 | 1.10 | 1.50 / 7.00 | 1.07 | 206 / 210 | 200 | e3 (leader) |",
		"s1 1.10× (1.07× with the readers polling)",
		"| s2 | s1 | 2 | 125 | 110 / 120 | 157 / 161 (e1) |",
		"every pair within its bound",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	for _, v := range r.targets() {
		if !v.Known || !v.Pass {
			t.Errorf("target %q: %s (%s), want met", v.Name, v.status(), v.Detail)
		}
	}
	png := filepath.Join(dir, "geo.png")
	if err := r.writePNG(png); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 1000 {
		t.Fatalf("plot: %v, %v", fi, err)
	}
}

// TestTargetsMissed checks that a slow chain and a fast etcd write are
// reported as missed targets.
func TestTargetsMissed(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir, 90) // position 1: 90 > 75 ms
	r, err := load(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Delay = 50 * time.Millisecond
	r.Sites[0].Etcd.Puts.MinMs = 60
	vs := r.targets()
	if !vs[0].Pass {
		t.Errorf("local target missed: %s", vs[0].Detail)
	}
	if vs[1].Pass {
		t.Errorf("etcd target met with a 60 ms write at 50 ms one way: %s", vs[1].Detail)
	}
	if vs[2].Pass || !strings.Contains(vs[2].Detail, "s1→s2 90.0 > 75.0 ms") {
		t.Errorf("visibility target: %s %q", vs[2].status(), vs[2].Detail)
	}
}

func TestLoadEmpty(t *testing.T) {
	if _, err := load(t.TempDir(), 3); err == nil {
		t.Fatal("load of an empty directory succeeded")
	}
}
