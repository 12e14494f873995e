package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/bondd/bondd/internal/bench"
)

// TestDrawAll draws a plots.json with one full and one empty plot and
// checks that only the full one gives files, and that bad input is an
// error.
func TestDrawAll(t *testing.T) {
	dir := t.TempDir()
	ps := bench.Plots{Plots: []bench.CDFPlot{
		{Name: "x", Title: "t", XLabel: "ms", XMax: 100, Series: []bench.CDFSeries{
			{Name: "a", Points: [][2]float64{{1, 0.2}, {2, 0.4}, {100, 1}}},
			{Name: "b", Points: [][2]float64{{2, 0.5}, {9, 1}}},
		}},
		{Name: "empty", Title: "t", XLabel: "ms"},
	}, Boxes: []bench.BoxPlot{
		{Name: "box", Title: "t", YLabel: "ms", Series: []bench.BoxSeries{
			{Name: "a", Values: []float64{1, 2, 3, 4, 50}},
			{Name: "b", Values: []float64{5, 6, 7}},
			{Name: "none"},
		}},
		{Name: "emptybox", Title: "t", YLabel: "ms", Series: []bench.BoxSeries{{Name: "none"}}},
	}, Lines: []bench.LinePlot{
		{Name: "line", Title: "t", XLabel: "bonds", YLabel: "MiB", LogX: true, Series: []bench.LineSeries{
			{Name: "a", Points: [][2]float64{{1, 0.5}, {10, 0.4}, {1000, 0.3}}},
			{Name: "b", Points: [][2]float64{{0, 1}}}, // x ≤ 0 on a log axis: left out
		}},
		{Name: "emptyline", Title: "t", XLabel: "x", YLabel: "y", LogX: true, Series: []bench.LineSeries{{Name: "b", Points: [][2]float64{{0, 1}}}}},
	}}
	b, _ := json.Marshal(ps)
	if err := os.WriteFile(filepath.Join(dir, bench.PlotsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := drawAll(dir)
	if err != nil || n != 3 {
		t.Fatalf("drawAll = %d, %v; want 3 plots", n, err)
	}
	for _, f := range []string{"x.png", "x.svg", "box.png", "box.svg", "line.png", "line.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"empty.png", "emptybox.png", "emptyline.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s: a plot without data was drawn", f)
		}
	}

	tests := []struct{ name, content string }{
		{"not JSON", "\x00\x01"},
		{"path in name", `{"plots":[{"name":"../x","series":[{"name":"a","points":[[1,1]]}]}]}`},
		{"path in box name", `{"boxes":[{"name":"../x","series":[{"name":"a","values":[1,2]}]}]}`},
		{"path in line name", `{"lines":[{"name":"../x","series":[{"name":"a","points":[[1,1]]}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, bench.PlotsFile), []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := drawAll(d); err == nil {
				t.Error("no error")
			}
		})
	}
	if _, err := drawAll(t.TempDir()); err == nil {
		t.Error("no error for a missing plots.json")
	}
}
