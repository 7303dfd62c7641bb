package main

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	benchplot "github.com/causeway-db/causeway/bench/plot"
)

// keyPanels are the panels of the geo dashboard drawn by --png-dir.
var keyPanels = []string{
	"Replication lag per site",
	"Time to global stability",
	"Dependency waits",
	"Request latency by site (p99)",
}

// Slug turns a panel title into a file name part: lowercase letters and
// digits, words joined by '-'.
func Slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

// panelTargets returns the targets of the panel title of dashboard.
func panelTargets(targets []Target, dashboard, title string) []Target {
	var out []Target
	for _, t := range targets {
		if t.Dashboard == dashboard && t.Panel == title {
			out = append(out, t)
		}
	}
	return out
}

// RenderPanels draws each key panel of dashboard over [end-window, end]
// into dir/dashboard-<dashboard>-<slug>.png (800×400) and returns the
// files written.
func RenderPanels(ctx context.Context, p *Prometheus, targets []Target, dashboard string, titles []string, dir string, window time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	end := time.Now()
	start := end.Add(-window)
	step := max(window/150, time.Second)
	var files []string
	for _, title := range titles {
		ts := panelTargets(targets, dashboard, title)
		if len(ts) == 0 {
			return files, fmt.Errorf("%s: no panel %q", dashboard, title)
		}
		var lines []line
		for _, t := range ts {
			ss, err := p.QueryRange(ctx, t.Expr, start, end, step)
			if err != nil {
				return files, fmt.Errorf("%s / %q: %w", dashboard, title, err)
			}
			for _, s := range ss {
				lines = append(lines, line{label: Legend(t.Legend, s.Metric), target: t.RefID, points: s.Points})
			}
		}
		name := "dashboard-" + strings.TrimSuffix(dashboard, ".json") + "-" + Slug(title) + ".png"
		path := filepath.Join(dir, name)
		if err := writePanelPNG(path, title, ts[0].Unit, lines, start, end); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// palette are Grafana's first classic series colors.
var palette = []color.Color{
	color.RGBA{0x73, 0xbf, 0x69, 0xff}, color.RGBA{0xf2, 0xcc, 0x0c, 0xff}, color.RGBA{0x8a, 0xb8, 0xff, 0xff},
	color.RGBA{0xff, 0x78, 0x0a, 0xff}, color.RGBA{0xf2, 0x49, 0x5c, 0xff}, color.RGBA{0x57, 0x94, 0xf2, 0xff},
	color.RGBA{0xb8, 0x77, 0xd9, 0xff}, color.RGBA{0x70, 0x5d, 0xa0, 0xff}, color.RGBA{0x37, 0x87, 0x2d, 0xff},
	color.RGBA{0xfa, 0xde, 0x2a, 0xff},
}

// plainTicks are gonum's default ticks with labels in the shortest
// decimal form (2500, not 2500.00).
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []gplot.Tick {
	ts := gplot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(math.Round(ts[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ts
}

// line is one series of a panel.
type line struct {
	label, target string
	points        []Point
}

// writePanelPNG draws lines (NaN samples are gaps) against wall-clock time.
func writePanelPNG(path, title, unit string, lines []line, start, end time.Time) error {
	p := gplot.New()
	p.Title.Text = title
	scale, ylabel := 1.0, unit
	switch unit {
	case "s":
		scale, ylabel = 1000, "ms"
	case "none", "short", "":
		ylabel = ""
	}
	p.Y.Label.Text = ylabel
	p.Y.Tick.Marker = plainTicks{}
	p.X.Tick.Marker = gplot.TimeTicks{Format: "15:04:05"}
	// From the first sample on (Prometheus may have started within the
	// window).
	first := end
	for _, l := range lines {
		for _, pt := range l.points {
			if !math.IsNaN(pt.V) && pt.T.Before(first) {
				first = pt.T
			}
		}
	}
	if first.Before(start) {
		first = start
	}
	p.X.Min, p.X.Max = float64(first.Unix()), float64(end.Unix())
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	drawn, entries := 0, 0
	for i, l := range lines {
		// Split at NaN into runs, so that a gap is not bridged.
		var runs []plotter.XYs
		var cur plotter.XYs
		for _, pt := range l.points {
			if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
				if len(cur) > 0 {
					runs = append(runs, cur)
					cur = nil
				}
				continue
			}
			cur = append(cur, plotter.XY{X: float64(pt.T.Unix()), Y: pt.V * scale})
		}
		if len(cur) > 0 {
			runs = append(runs, cur)
		}
		for j, r := range runs {
			ln, err := plotter.NewLine(r)
			if err != nil {
				return err
			}
			ln.Color = palette[i%len(palette)]
			ln.Width = vg.Points(1.5)
			if l.target != "A" {
				ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(ln)
			if j == 0 {
				p.Legend.Add(l.label, ln)
				entries++
			}
			drawn++
		}
	}
	if drawn == 0 {
		p.Title.Text += " (no data)"
	} else if p.Y.Max > 0 {
		p.Y.Max *= 1.1 + 0.1*float64(entries) // room for the legend
	}
	img := vgimg.NewWith(vgimg.UseWH(8*vg.Inch, 4*vg.Inch), vgimg.UseDPI(100))
	p.Draw(draw.New(img))
	return benchplot.SavePNG(img, path)
}
