package main

// CDF plots of bondd bench, drawn with gonum.org/v1/plot into PNG and SVG.

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// cdfMaxPoints bounds the points drawn per line, so that an SVG of a long
// run stays small (a CDF of 25 000 samples needs no more to look exact).
const cdfMaxPoints = 400

// cdfSeries is one line of a CDF plot.
type cdfSeries struct {
	Name   string
	Sorted []float64 // samples in ascending order; not modified
}

// cdfPoints returns at most cdfMaxPoints points (x = sample, y = fraction
// of samples ≤ x) of the empirical CDF of sorted, always including the
// first and the last sample.
func cdfPoints(sorted []float64) plotter.XYs {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	step := max(1, n/cdfMaxPoints)
	pts := make(plotter.XYs, 0, n/step+2)
	for i := 0; i < n; i += step {
		pts = append(pts, plotter.XY{X: sorted[i], Y: float64(i+1) / float64(n)})
	}
	if last := pts[len(pts)-1]; last.Y < 1 {
		pts = append(pts, plotter.XY{X: sorted[n-1], Y: 1})
	}
	return pts
}

// writeCDFPlot writes dir/name.png and dir/name.svg: one CDF line per
// series with samples (empty series are left out), x in xlabel units.
func writeCDFPlot(dir, name, title, xlabel string, series []cdfSeries) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "fraction ≤ x"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	// The x axis ends just past the largest P99.9 so that one outlier does
	// not squeeze every curve against the left edge; lines are clipped.
	var xmax float64
	for _, s := range series {
		xmax = max(xmax, quantile(s.Sorted, 0.999))
	}
	if xmax > 0 {
		p.X.Min, p.X.Max = 0, 1.1*xmax
	}
	i := 0
	for _, s := range series {
		pts := cdfPoints(s.Sorted)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i) // colours repeat and some are close: vary the dashes too
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(s.Name, l)
		i++
	}
	if i == 0 {
		return nil
	}
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name+"."+ext)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
	}
	return nil
}
