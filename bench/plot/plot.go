// Package plot draws YCSB results (package bench/ycsbrun) with gonum/plot:
// throughput against client count, one panel per workload, one line per
// mode (Causeway solid, etcd dashed) through the median of the rounds,
// with error bars from the lowest to the highest round.
package plot

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"slices"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsbrun"
)

// style of each mode's line.
type style struct {
	color  color.Color
	dashes []vg.Length
	shape  draw.GlyphDrawer
}

var styles = map[string]style{
	drivers.ModeCausewayCausal: {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil, draw.CircleGlyph{}},
	drivers.ModeCausewayStrong: {color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, nil, draw.SquareGlyph{}},
	drivers.ModeEtcdSer:        {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, []vg.Length{vg.Points(6), vg.Points(3)}, draw.TriangleGlyph{}},
	drivers.ModeEtcdLin:        {color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, []vg.Length{vg.Points(6), vg.Points(3)}, draw.CrossGlyph{}},
	drivers.ModeCausewayRaw:    {color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}, draw.PyramidGlyph{}},
	drivers.ModeMemory:         {color.Gray{Y: 0x60}, []vg.Length{vg.Points(2), vg.Points(2)}, draw.RingGlyph{}},
}

// Throughput builds one panel per workload of r (in setup order) with the
// throughput of every mode against the client count (log scale): the
// median over the rounds, with min–max error bars when there are several.
func Throughput(r *ycsbrun.Report) ([]*gplot.Plot, error) {
	points := r.Points
	if len(points) == 0 {
		points = ycsbrun.Aggregate(r.Results)
	}
	var workloads []string
	for _, w := range r.Setup.Workloads {
		if slices.ContainsFunc(points, func(p ycsbrun.Point) bool { return p.Workload == w }) {
			workloads = append(workloads, w)
		}
	}
	for _, p := range points {
		if !slices.Contains(workloads, p.Workload) {
			workloads = append(workloads, p.Workload)
		}
	}
	if len(workloads) == 0 {
		return nil, fmt.Errorf("plot: no results")
	}
	var plots []*gplot.Plot
	for _, w := range workloads {
		p := gplot.New()
		p.Title.Text = "YCSB-" + w
		if len(w) > 1 {
			p.Title.Text = w
		}
		p.X.Label.Text = "clients"
		p.Y.Label.Text = "ops/s"
		p.X.Scale = gplot.LogScale{}
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		var ticks []gplot.Tick
		var modes []string
		for _, pt := range points {
			if pt.Workload == w && !slices.Contains(modes, pt.Mode) {
				modes = append(modes, pt.Mode)
			}
		}
		slices.SortStableFunc(modes, func(a, b string) int { return slices.Index(drivers.Modes, a) - slices.Index(drivers.Modes, b) })
		for _, m := range modes {
			var xys errXYs
			for _, pt := range points {
				if pt.Workload == w && pt.Mode == m && pt.Clients > 0 {
					t := pt.Throughput
					xys = append(xys, errXY{XY: plotter.XY{X: float64(pt.Clients), Y: t.Median}, low: t.Median - t.Min, high: t.Max - t.Median})
					if !slices.ContainsFunc(ticks, func(t gplot.Tick) bool { return t.Value == float64(pt.Clients) }) {
						ticks = append(ticks, gplot.Tick{Value: float64(pt.Clients), Label: strconv.Itoa(pt.Clients)})
					}
				}
			}
			slices.SortFunc(xys, func(a, b errXY) int { return cmp.Compare(a.X, b.X) })
			if len(xys) == 0 {
				continue
			}
			line, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			st, ok := styles[m]
			if !ok {
				st = style{color: color.Black, shape: draw.CircleGlyph{}}
			}
			line.Color, line.Dashes, line.Width = st.color, st.dashes, vg.Points(1.5)
			pts.Color, pts.Shape, pts.Radius = st.color, st.shape, vg.Points(3)
			p.Add(line, pts)
			if xys.spread() {
				bars, err := plotter.NewYErrorBars(xys)
				if err != nil {
					return nil, err
				}
				bars.Color, bars.Width, bars.CapWidth = st.color, vg.Points(1), vg.Points(6)
				p.Add(bars)
			}
			p.Legend.Add(m, line, pts)
		}
		p.X.Tick.Marker = gplot.ConstantTicks(ticks)
		p.Y.Tick.Marker = opsTicks{}
		if p.Y.Max > 0 {
			p.Y.Max *= 1.25 // room for the legend
		}
		if len(ticks) == 1 { // a log axis needs a range
			p.X.Min, p.X.Max = ticks[0].Value/2, ticks[0].Value*2
		}
		plots = append(plots, p)
	}
	return plots, nil
}

// errXY is a median with the distances down to the lowest and up to the
// highest round.
type errXY struct {
	plotter.XY
	low, high float64
}

// errXYs are the points of one line: an XYer and a YErrorer.
type errXYs []errXY

func (e errXYs) Len() int                        { return len(e) }
func (e errXYs) XY(i int) (float64, float64)     { return e[i].X, e[i].Y }
func (e errXYs) YError(i int) (float64, float64) { return e[i].low, e[i].high }
func (e errXYs) spread() bool {
	return slices.ContainsFunc(e, func(p errXY) bool { return p.low > 0 || p.high > 0 })
}

// opsTicks are gonum's default ticks labelled as whole numbers (k for
// thousands).
type opsTicks struct{}

func (opsTicks) Ticks(min, max float64) []gplot.Tick {
	ts := gplot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		v := ts[i].Value
		switch {
		case v >= 10000:
			ts[i].Label = strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
		default:
			ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ts
}

// WritePNG draws the panels of Throughput in a grid (two columns) into a
// PNG file.
func WritePNG(r *ycsbrun.Report, path string) error {
	plots, err := Throughput(r)
	if err != nil {
		return err
	}
	title := r.Title
	if title == "" {
		title = "YCSB throughput"
	}
	return SavePNG(Grid(title, plots, 5*vg.Inch), path)
}

// Grid draws plots in a grid of two columns, each tileWidth wide, under a
// title line.
func Grid(title string, plots []*gplot.Plot, tileWidth vg.Length) *vgimg.Canvas {
	cols := max(1, min(2, len(plots)))
	rows := (len(plots) + cols - 1) / cols
	const tileH = 3.6 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(tileWidth*vg.Length(cols), tileH*vg.Length(rows)+0.4*vg.Inch), vgimg.UseDPI(110))
	dc := draw.New(img)
	font := gplot.DefaultFont
	font.Size = vg.Points(13)
	ts := draw.TextStyle{Color: color.Black, Font: font, XAlign: draw.XCenter, YAlign: draw.YTop, Handler: gplot.DefaultTextHandler}
	dc.FillText(ts, vg.Point{X: dc.Max.X / 2, Y: dc.Max.Y - vg.Points(4)}, title)
	body := draw.Crop(dc, 0, 0, 0, -0.4*vg.Inch)
	grid := make([][]*gplot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*gplot.Plot, cols)
		for j := range cols {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(10), PadX: vg.Points(12), PadY: vg.Points(12)}
	canvases := gplot.Align(grid, tiles, body)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	return img
}

// SavePNG writes img to path as a PNG.
func SavePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
