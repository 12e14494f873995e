package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// PlotsFile is the file, beside results.json, that holds the data of a
// run's CDF plots. cmd/bondd-plot draws them (PNG and SVG); bench itself
// links no plotting library, so neither does the bondd binary.
const PlotsFile = "plots.json"

// cdfMaxPoints bounds the points stored per line, so that the file and an
// SVG of a long run stay small (a CDF of 25 000 samples needs no more to
// look exact).
const cdfMaxPoints = 400

// Plots is the content of PlotsFile.
type Plots struct {
	Plots []CDFPlot `json:"plots"`
	// Boxes are box plots (the spread of a per-window metric over all
	// runs, one box per configuration).
	Boxes []BoxPlot `json:"boxes,omitempty"`
	// Lines are x–y line plots (a figure against a swept parameter, such
	// as memory per bond against the number of bonds).
	Lines []LinePlot `json:"lines,omitempty"`
}

// LinePlot is one x–y plot: one line per series, points joined in order.
type LinePlot struct {
	Name   string       `json:"name"` // file name of the drawing, without extension
	Title  string       `json:"title"`
	XLabel string       `json:"x_label"`
	YLabel string       `json:"y_label"`
	LogX   bool         `json:"log_x"` // logarithmic x axis (x > 0)
	Series []LineSeries `json:"series"`
}

// LineSeries is one line of a LinePlot: (x, y) points in drawing order.
type LineSeries struct {
	Name   string       `json:"name"`
	Points [][2]float64 `json:"points"`
}

// BoxPlot is one box plot: one box per configuration.
type BoxPlot struct {
	Name   string      `json:"name"` // file name of the drawing, without extension
	Title  string      `json:"title"`
	YLabel string      `json:"y_label"`
	Series []BoxSeries `json:"series"`
}

// BoxSeries is one box: the samples and their five-number summary
// (quantiles by linear interpolation).
type BoxSeries struct {
	Name   string    `json:"name"`
	Min    float64   `json:"min"`
	Q1     float64   `json:"q1"`
	Median float64   `json:"median"`
	Q3     float64   `json:"q3"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"` // ascending
}

// boxSeries is one box as measured.
type boxSeries struct {
	Name   string
	Sorted []float64 // ascending; not modified
}

// boxPlot returns the box plot of series, leaving out empty series.
func boxPlot(name, title, ylabel string, series []boxSeries) BoxPlot {
	p := BoxPlot{Name: name, Title: title, YLabel: ylabel}
	for _, s := range series {
		v := s.Sorted
		if len(v) == 0 {
			continue
		}
		p.Series = append(p.Series, BoxSeries{Name: s.Name, Min: v[0], Q1: quantileLinear(v, 0.25), Median: quantileLinear(v, 0.5),
			Q3: quantileLinear(v, 0.75), Max: v[len(v)-1], Values: v})
	}
	return p
}

// CDFPlot is one CDF plot: one line per configuration.
type CDFPlot struct {
	// Name is the file name of the drawing, without extension.
	Name   string `json:"name"`
	Title  string `json:"title"`
	XLabel string `json:"x_label"`
	// XMax is the largest P99.9 of the series: the drawing's x axis ends
	// just past it, so that one outlier does not squeeze every curve
	// against the left edge. 0 when every series is empty.
	XMax   float64     `json:"x_max"`
	Series []CDFSeries `json:"series"`
}

// CDFSeries is one line of a CDF plot: points (x = sample, y = fraction of
// samples ≤ x) of the empirical CDF, x ascending.
type CDFSeries struct {
	Name   string       `json:"name"`
	Points [][2]float64 `json:"points"`
}

// cdfSeries is one line of a CDF plot as measured.
type cdfSeries struct {
	Name   string
	Sorted []float64 // samples in ascending order; not modified
}

// cdfPlot returns the plot of series, leaving out empty series.
func cdfPlot(name, title, xlabel string, series []cdfSeries) CDFPlot {
	p := CDFPlot{Name: name, Title: title, XLabel: xlabel}
	for _, s := range series {
		if len(s.Sorted) == 0 {
			continue
		}
		p.XMax = max(p.XMax, quantile(s.Sorted, 0.999))
		p.Series = append(p.Series, CDFSeries{Name: s.Name, Points: cdfPoints(s.Sorted)})
	}
	return p
}

// cdfPoints returns at most cdfMaxPoints points (x = sample, y = fraction
// of samples ≤ x) of the empirical CDF of sorted, always including the
// first and the last sample.
func cdfPoints(sorted []float64) [][2]float64 {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	step := max(1, n/cdfMaxPoints)
	pts := make([][2]float64, 0, n/step+2)
	for i := 0; i < n; i += step {
		pts = append(pts, [2]float64{sorted[i], float64(i+1) / float64(n)})
	}
	if last := pts[len(pts)-1]; last[1] < 1 {
		pts = append(pts, [2]float64{sorted[n-1], 1})
	}
	return pts
}

// writePlots writes dir/PlotsFile.
func writePlots(dir string, plots ...CDFPlot) error { return writePlotsBoxes(dir, plots, nil) }

// writePlotsBoxes writes dir/PlotsFile with CDF and box plots.
func writePlotsBoxes(dir string, plots []CDFPlot, boxes []BoxPlot) error {
	return writePlotsAll(dir, Plots{Plots: plots, Boxes: boxes})
}

// writePlotsAll writes ps to dir/PlotsFile.
func writePlotsAll(dir string, ps Plots) error {
	b, err := json.MarshalIndent(ps, "", " ")
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, PlotsFile), append(b, '\n'), 0o644)
}
