package main

import (
	"fmt"
	"image/color"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	benchplot "github.com/causeway-db/causeway/bench/plot"
)

var (
	causewayColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	singleColor   = color.RGBA{R: 0x9e, G: 0xc5, B: 0xe8, A: 0xff}
	etcdColor     = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// series is one bar per group.
type series struct {
	name   string
	color  color.Color
	values []float64 // NaN-free; 0 where not measured
	known  []bool
}

// barPanel draws grouped bars (one group per label, one bar per series)
// with each bar's value written above it.
func barPanel(title, ylabel string, labels []string, ss []series, format func(float64) string) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	const w = 14
	width := vg.Points(w)
	max := 0.0
	for k, s := range ss {
		vals := make(plotter.Values, len(s.values))
		copy(vals, s.values)
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		off := vg.Points(w * (float64(k) - float64(len(ss)-1)/2))
		bars.Color, bars.LineStyle.Width, bars.Offset = s.color, 0, off
		p.Add(bars)
		p.Legend.Add(s.name, bars)
		var xys plotter.XYs
		var texts []string
		for i, v := range s.values {
			if !s.known[i] {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(i), Y: v})
			texts = append(texts, format(v))
			if v > max {
				max = v
			}
		}
		if len(xys) > 0 {
			l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
			if err != nil {
				return nil, err
			}
			for i := range l.TextStyle {
				l.TextStyle[i].Font.Size = vg.Points(7)
				l.TextStyle[i].XAlign = draw.XCenter
			}
			l.Offset = vg.Point{X: off, Y: vg.Points(2)}
			p.Add(l)
		}
	}
	p.NominalX(labels...)
	p.Y.Tick.Marker = plainTicks{}
	if max > 0 {
		p.Y.Max = max * 1.5 // room for the labels and the legend
	}
	return p, nil
}

// plainTicks are gonum's default ticks with labels in the shortest form
// (250, not 250.00).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []gplot.Tick {
	ts := gplot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

func msLabel(v float64) string { return ms(v) }

func opsLabel(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// panels builds the plot's four panels: put p50 and p99 per site, YCSB-B
// per site, remote visibility p99 per pair of sites.
func (r *report) panels() ([]*gplot.Plot, error) {
	var labels []string
	mk := func(name string, c color.Color) series {
		return series{name: name, color: c, values: make([]float64, len(r.Sites)), known: make([]bool, len(r.Sites))}
	}
	single, cw, et := mk("Causeway, single site", singleColor), mk("Causeway LOCAL", causewayColor), mk("etcd", etcdColor)
	single99, cw99, et99 := mk("Causeway, single site", singleColor), mk("Causeway LOCAL", causewayColor), mk("etcd", etcdColor)
	ycw, yet := mk("Causeway", causewayColor), mk("etcd", etcdColor)
	set := func(s *series, i int, v float64) { s.values[i], s.known[i] = v, true }
	for i, s := range r.Sites {
		labels = append(labels, s.Name)
		if g := s.CausewaySingle; g != nil && g.Puts.N > 0 {
			set(&single, i, g.Puts.P50Ms)
			set(&single99, i, g.Puts.P99Ms)
		}
		if g := s.Causeway; g != nil && g.Puts.N > 0 {
			set(&cw, i, g.Puts.P50Ms)
			set(&cw99, i, g.Puts.P99Ms)
		}
		if g := s.Etcd; g != nil && g.Puts.N > 0 {
			set(&et, i, g.Puts.P50Ms)
			set(&et99, i, g.Puts.P99Ms)
		}
		if y := s.CausewayYCSB; y != nil {
			set(&ycw, i, y.Throughput)
		}
		if y := s.EtcdYCSB; y != nil {
			set(&yet, i, y.Throughput)
		}
	}
	var out []*gplot.Plot
	p, err := barPanel("put latency p50, 1 client", "ms", labels, []series{single, cw, et}, msLabel)
	if err != nil {
		return nil, err
	}
	out = append(out, p)
	if p, err = barPanel("put latency p99, 1 client", "ms", labels, []series{single99, cw99, et99}, msLabel); err != nil {
		return nil, err
	}
	out = append(out, p)
	if p, err = barPanel("YCSB-B at one site at a time", "ops/s", labels, []series{ycw, yet}, opsLabel); err != nil {
		return nil, err
	}
	out = append(out, p)

	var pairs []string
	var vcw, vet, bound series
	vcw, vet = series{name: "Causeway p99", color: causewayColor}, series{name: "etcd p99", color: etcdColor}
	bound = series{name: "bound: chain delays + 25 ms", color: color.Gray{Y: 0xa0}}
	for _, s := range r.Sites {
		if s.Causeway == nil {
			continue
		}
		for k, v := range s.Causeway.Visibility {
			pairs = append(pairs, s.Name+"→"+v.Name)
			add := func(ss *series, val float64, ok bool) {
				ss.values, ss.known = append(ss.values, val), append(ss.known, ok)
			}
			add(&vcw, v.Delay.P99Ms, v.Delay.N > 0)
			if s.Etcd != nil && k < len(s.Etcd.Visibility) && s.Etcd.Visibility[k].Delay.N > 0 {
				add(&vet, s.Etcd.Visibility[k].Delay.P99Ms, true)
			} else {
				add(&vet, 0, false)
			}
			if v.Position > 0 {
				add(&bound, r.bound(v.Position), true)
			} else {
				add(&bound, 0, false)
			}
		}
	}
	if len(pairs) > 0 {
		if p, err = barPanel("remote visibility p99 (written→seen)", "ms", pairs, []series{vcw, bound, vet}, msLabel); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// writePNG draws the panels in a 2-column grid under a title line.
func (r *report) writePNG(path string) error {
	plots, err := r.panels()
	if err != nil {
		return err
	}
	if len(plots) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	return benchplot.SavePNG(benchplot.Grid(r.Title, plots, 5.5*vg.Inch), path)
}
