// Command bondd-plot draws the CDF, box and line plots of a bondd bench run: it reads
// DIR/plots.json (internal/bench.PlotsFile), which bench writes beside
// results.json, and writes DIR/NAME.png and DIR/NAME.svg for each plot.
//
//	go run ./cmd/bondd-plot bench-out
//
// It is a separate command so that the bondd binary, which runs on edges
// and concentrators, links no plotting library (gonum/plot).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/bondd/bondd/internal/bench"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: bondd-plot DIR\n\nDraws DIR/"+bench.PlotsFile+" (written by bondd bench) as PNG and SVG files in DIR.")
		os.Exit(2)
	}
	n, err := drawAll(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bondd-plot:", err)
		os.Exit(1)
	}
	fmt.Printf("%d plots drawn in %s\n", n, os.Args[1])
}

// drawAll draws every plot of dir/plots.json into dir and returns how many
// it drew (plots without lines are skipped).
func drawAll(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, bench.PlotsFile))
	if err != nil {
		return 0, err
	}
	var ps bench.Plots
	if err := json.Unmarshal(b, &ps); err != nil {
		return 0, fmt.Errorf("%s: %w", bench.PlotsFile, err)
	}
	n := 0
	for _, p := range ps.Plots {
		drawn, err := drawCDF(dir, p)
		if err != nil {
			return n, err
		}
		if drawn {
			n++
		}
	}
	for _, p := range ps.Lines {
		drawn, err := drawLines(dir, p)
		if err != nil {
			return n, err
		}
		if drawn {
			n++
		}
	}
	for _, p := range ps.Boxes {
		drawn, err := drawBoxes(dir, p)
		if err != nil {
			return n, err
		}
		if drawn {
			n++
		}
	}
	return n, nil
}

// drawBoxes writes dir/NAME.png and dir/NAME.svg: one box (quartiles,
// whiskers to 1.5 IQR, outliers) per series, named on the x axis. It draws
// nothing and returns false when the plot has no series with values.
func drawBoxes(dir string, c bench.BoxPlot) (bool, error) {
	if c.Name == "" || filepath.Base(c.Name) != c.Name {
		return false, fmt.Errorf("plot name %q: expected a file name", c.Name)
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.Y.Label.Text = c.YLabel
	p.Add(plotter.NewGrid())
	var names []string
	for _, s := range c.Series {
		if len(s.Values) == 0 {
			continue
		}
		b, err := plotter.NewBoxPlot(vg.Points(18), float64(len(names)), plotter.Values(s.Values))
		if err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
		b.FillColor = plotutil.Color(len(names))
		p.Add(b)
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return false, nil
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = -1.0, -0.5 // text.XRight, text.YCenter: labels end under their box
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, c.Name+"."+ext)); err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
	}
	return true, nil
}

// drawLines writes dir/NAME.png and dir/NAME.svg: one line with point
// marks per series, on a logarithmic x axis when LogX (points with x ≤ 0
// are then left out). It draws nothing and returns false when no series
// has a point.
func drawLines(dir string, c bench.LinePlot) (bool, error) {
	if c.Name == "" || filepath.Base(c.Name) != c.Name {
		return false, fmt.Errorf("plot name %q: expected a file name", c.Name)
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true // top right: the figures of a ramp fall with x
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	drawn := 0
	for i, s := range c.Series {
		var pts plotter.XYs
		for _, xy := range s.Points {
			if c.LogX && xy[0] <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: xy[0], Y: xy[1]})
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
		drawn++
	}
	if drawn == 0 {
		return false, nil
	}
	p.Y.Min = 0
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, c.Name+"."+ext)); err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
	}
	return true, nil
}

// drawCDF writes dir/NAME.png and dir/NAME.svg: one CDF line per series. It
// draws nothing and returns false when the plot has no series.
func drawCDF(dir string, c bench.CDFPlot) (bool, error) {
	if len(c.Series) == 0 {
		return false, nil
	}
	if c.Name == "" || filepath.Base(c.Name) != c.Name {
		return false, fmt.Errorf("plot name %q: expected a file name", c.Name)
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = "fraction ≤ x"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	// The x axis ends just past the largest P99.9 so that one outlier does
	// not squeeze every curve against the left edge; lines are clipped.
	if c.XMax > 0 {
		p.X.Min, p.X.Max = 0, 1.1*c.XMax
	}
	for i, s := range c.Series {
		pts := make(plotter.XYs, len(s.Points))
		for j, xy := range s.Points {
			pts[j] = plotter.XY{X: xy[0], Y: xy[1]}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i) // colours repeat and some are close: vary the dashes too
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, c.Name+"."+ext)); err != nil {
			return false, fmt.Errorf("plot %s: %w", c.Name, err)
		}
	}
	return true, nil
}
