package core

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Table is a markdown table built row by row. A column of figures (every
// cell starts with a digit or is "-", none is longer than 40 bytes) is
// right-aligned; text is left-aligned.
type Table struct {
	header []string
	rows   [][]string
}

// NewTable starts a table with the given column headers.
func NewTable(header ...string) *Table { return &Table{header: header} }

// Row appends a row; each cell is formatted with fmt.Sprint, and missing
// cells are "-".
func (t *Table) Row(cells ...any) {
	row := make([]string, len(t.header))
	for i := range row {
		row[i] = "-"
		if i < len(cells) {
			row[i] = fmt.Sprint(cells[i])
		}
	}
	t.rows = append(t.rows, row)
}

// Len is the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// figure reports whether a cell is a figure (a number, maybe with a unit
// or a range), not text.
func figure(s string) bool {
	return s == "-" || s != "" && len(s) <= 40 && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+')
}

// String renders the table, one line per row, ending with a newline.
func (t *Table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	b.WriteString("|")
	for i := range t.header {
		right := len(t.rows) > 0 && !slices.ContainsFunc(t.rows, func(r []string) bool { return !figure(r[i]) })
		if right {
			b.WriteString("--:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

// SplitList splits a comma-separated flag value, trimming spaces and
// dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Ms formats milliseconds with three decimals.
func Ms(v float64) string { return fmt.Sprintf("%.3f", v) }

// Ops formats a throughput as a whole number.
func Ops(v float64) string { return fmt.Sprintf("%.0f", v) }

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ReadJSON reads the JSON file path into v.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Spread is a set of repeated measurements of one quantity: their median,
// minimum and maximum.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// N is the number of measurements.
	N int `json:"n"`
}

// SpreadOf returns the spread of vs (the zero Spread for none). The median
// of an even count is the mean of the two middle values.
func SpreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// RelRange is (Max - Min) / Median: the spread as a fraction of the median
// (0 when the median is not positive).
func (s Spread) RelRange() float64 {
	if s.Median <= 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}

// Format renders the median with the verb of f and, for more than one
// measurement, the range: "12.3 (11.0–14.1)".
func (s Spread) Format(f string) string {
	out := fmt.Sprintf(f, s.Median)
	if s.N > 1 {
		out += fmt.Sprintf(" ("+f+"–"+f+")", s.Min, s.Max)
	}
	return out
}

// WriteFile writes through fn to path; "-" writes to stdout.
func WriteFile(path string, stdout io.Writer, fn func(io.Writer) error) error {
	if path == "-" {
		return fn(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
