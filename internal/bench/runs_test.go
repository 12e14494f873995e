package bench

import (
	"math"
	"slices"
	"testing"
)

func TestBootstrapMedianCI(t *testing.T) {
	spread := []float64{10, 12, 9, 30, 11, 13, 10, 8, 12, 11}
	tests := []struct {
		name   string
		v      []float64
		lo, hi float64 // want exactly, when wantExact
		exact  bool
	}{
		{"none", nil, 0, 0, true},
		{"one", []float64{7}, 7, 7, true},
		{"constant", []float64{3, 3, 3, 3}, 3, 3, true},
		{"spread", spread, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.v)
			lo, hi := bootstrapMedianCI(tc.v, bootstrapResamples, 1)
			if !slices.Equal(orig, tc.v) {
				t.Error("input modified")
			}
			if tc.exact {
				if lo != tc.lo || hi != tc.hi {
					t.Errorf("CI = [%v, %v], want [%v, %v]", lo, hi, tc.lo, tc.hi)
				}
				return
			}
			s := slices.Sorted(slices.Values(tc.v))
			m := median(s)
			// The interval holds the sample median, lies within the
			// sample's range, and is narrower than it: the outlier 30
			// cannot be a median of ten draws often enough to reach the
			// 97.5 % point.
			if !(lo <= m && m <= hi && lo >= s[0] && hi < s[len(s)-1]) {
				t.Errorf("CI [%v, %v] for median %v of %v", lo, hi, m, s)
			}
			if lo2, hi2 := bootstrapMedianCI(tc.v, bootstrapResamples, 1); lo2 != lo || hi2 != hi {
				t.Error("same seed, different interval")
			}
		})
	}
	// More runs of the same distribution give a narrower interval.
	var many []float64
	for range 10 {
		many = append(many, spread...)
	}
	lo1, hi1 := bootstrapMedianCI(spread, bootstrapResamples, 2)
	lo2, hi2 := bootstrapMedianCI(many, bootstrapResamples, 2)
	if hi2-lo2 > hi1-lo1 {
		t.Errorf("100 samples: width %v, 10 samples: %v", hi2-lo2, hi1-lo1)
	}
}

func TestQuantileLinear(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.25, 2}, {0.5, 3}, {0.625, 3.5}, {1, 5}, {-1, 1}, {2, 5}} {
		if got := quantileLinear(s, tc.q); got != tc.want {
			t.Errorf("quantile %v = %v, want %v", tc.q, got, tc.want)
		}
	}
	if quantileLinear(nil, 0.5) != 0 {
		t.Error("empty: not 0")
	}
}

type medianTest struct {
	Name  string             `json:"name"`
	N     uint64             `json:"n"`
	X     float64            `json:"x"`
	OWD   owdStats           `json:"owd_ms"`
	Paths []benchPath        `json:"paths"`
	ByKey map[string]float64 `json:"by_key"`
	Runs  int                `json:"runs"`
	CI95  ciMap              `json:"ci95"`
	local []float64
}

func TestMedianResult(t *testing.T) {
	mk := func(n uint64, x, p95 float64, share float64) medianTest {
		return medianTest{Name: "a", N: n, X: x, OWD: owdStats{P95: p95}, Paths: []benchPath{{Name: "p", Share: share}},
			ByKey: map[string]float64{"k": x}, local: []float64{1}}
	}
	runs := []medianTest{mk(1, 0.5, 100, 0.1), mk(4, 0.1, 300, 0.3), mk(2, 0.3, 200, 0.2), mk(3, 0.2, 150, 0.4)}
	got, err := medianResult(runs, 1, "x", "owd_ms")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "a" || got.N != 3 || math.Abs(got.X-0.25) > 1e-12 || got.OWD.P95 != 175 || got.ByKey["k"] != got.X {
		t.Errorf("medians: %+v", got)
	}
	if math.Abs(got.Paths[0].Share-0.25) > 1e-12 || got.Paths[0].Name != "p" {
		t.Errorf("array element: %+v", got.Paths)
	}
	if got.Runs != 4 || got.local != nil {
		t.Errorf("runs %d, unexported %v", got.Runs, got.local)
	}
	for _, k := range []string{"x", "owd_ms.p95", "owd_ms.mean"} {
		ci, ok := got.CI95[k]
		if !ok {
			t.Errorf("no ci95 for %s: %v", k, got.CI95)
			continue
		}
		if ci[0] > ci[1] {
			t.Errorf("ci95[%s] = %v", k, ci)
		}
	}
	if _, ok := got.CI95["n"]; ok {
		t.Error("ci95 for a key not asked for")
	}
	if ci := got.CI95["owd_ms.p95"]; !(ci[0] <= 175 && 175 <= ci[1]) {
		t.Errorf("ci95 of p95 %v does not hold the median 175", ci)
	}
	if _, err := medianResult([]medianTest(nil), 1); err == nil {
		t.Error("no error for no runs")
	}
}
