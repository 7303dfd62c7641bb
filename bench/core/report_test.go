package core

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	tb := NewTable("op", "clients", "ops/s", "note", "measured")
	tb.Row("get (CAUSAL)", 1, "1234", "a|b", "1.5× (peak medians: 100 ops/s at 16 clients, 80 ops/s at 1 client)")
	tb.Row("put", 64, "-")
	want := "| op | clients | ops/s | note | measured |\n" +
		"|---|--:|--:|---|---|\n" +
		"| get (CAUSAL) | 1 | 1234 | a\\|b | 1.5× (peak medians: 100 ops/s at 16 clients, 80 ops/s at 1 client) |\n" +
		"| put | 64 | - | - | - |\n"
	if got := tb.String(); got != want {
		t.Errorf("table\n%s\nwant\n%s", got, want)
	}
	if tb.Len() != 2 {
		t.Errorf("len %d", tb.Len())
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{5}, Spread{5, 5, 5, 1}},
		{[]float64{3, 1, 2}, Spread{2, 1, 3, 3}},
		{[]float64{4, 1, 2, 10}, Spread{3, 1, 10, 4}},
	} {
		if got := SpreadOf(c.in); got != c.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	s := SpreadOf([]float64{90, 100, 120})
	if s.RelRange() != 0.3 {
		t.Errorf("relative range %.3f, want 0.3", s.RelRange())
	}
	if got := s.Format("%.0f"); got != "100 (90–120)" {
		t.Errorf("format %q", got)
	}
	if got := SpreadOf([]float64{1.5}).Format("%.2f"); got != "1.50" {
		t.Errorf("one round: %q", got)
	}
	if (Spread{}).RelRange() != 0 {
		t.Error("empty spread has a range")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	type doc struct {
		A int
		S Spread
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, doc{A: 1, S: SpreadOf([]float64{1, 2})}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "}\n") || !strings.Contains(b.String(), "\n  \"A\": 1") {
		t.Errorf("not indented JSON with a final newline: %q", b.String())
	}
	path := filepath.Join(t.TempDir(), "d.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var back doc
	if err := ReadJSON(path, &back); err != nil || back.A != 1 || back.S.Median != 1.5 {
		t.Errorf("read back %+v, %v", back, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(path, &back); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("bad JSON: %v", err)
	}
}

func TestSplitList(t *testing.T) {
	if got := SplitList(" a, b,,c ,"); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("SplitList = %q", got)
	}
	if got := SplitList(""); got != nil {
		t.Errorf("empty: %q", got)
	}
}
