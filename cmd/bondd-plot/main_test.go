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
	}}
	b, _ := json.Marshal(ps)
	if err := os.WriteFile(filepath.Join(dir, bench.PlotsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := drawAll(dir)
	if err != nil || n != 1 {
		t.Fatalf("drawAll = %d, %v; want 1 plot", n, err)
	}
	for _, f := range []string{"x.png", "x.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "empty.png")); err == nil {
		t.Error("a plot without lines was drawn")
	}

	tests := []struct{ name, content string }{
		{"not JSON", "\x00\x01"},
		{"path in name", `{"plots":[{"name":"../x","series":[{"name":"a","points":[[1,1]]}]}]}`},
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
