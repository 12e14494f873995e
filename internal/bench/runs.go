package bench

// Repeated runs (--runs N): every configuration runs N times, run r with
// seed --seed + r (its own trace offsets and random streams, the same for
// every configuration of that run, so comparisons stay paired), and
// results.json reports per configuration the median over the runs of each
// number, the count of runs (runs) and, for the scenario's headline
// numbers, a 95 % bootstrap confidence interval of the median (ci95).

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// bootstrapResamples is the number of bootstrap resamples of a confidence
// interval.
const bootstrapResamples = 2000

// ciMap holds 95 % confidence intervals [low, high] of medians, keyed by
// the JSON path of the number in its configuration ("loss_rate",
// "owd_ms.p95").
type ciMap map[string][2]float64

// text renders the interval of key as " [lo, hi]", or "" when there is
// none or it is a single point.
func (m ciMap) text(key string) string {
	v, ok := m[key]
	if !ok || v[0] == v[1] {
		return ""
	}
	return fmt.Sprintf(" [%.4g, %.4g]", v[0], v[1])
}

// runs returns the number of runs, at least 1.
func (o *Options) runs() int { return max(1, o.Runs) }

// forRun returns the options of run r (0-based): seed o.Seed + r.
func (o Options) forRun(r int) Options {
	o.Seed += uint64(r)
	return o
}

// header returns the results.json header of a run of o.
func (o *Options) header(traces []string) benchHeader {
	return benchHeader{Scenario: o.Scenario, Seed: o.Seed, Runs: o.runs(), DurationS: o.Duration.Seconds(),
		Traces: traces, Started: time.Now().UTC(), Command: o.commandLine(), Commit: buildCommit()}
}

// bootstrapMedianCI returns the 95 % percentile-bootstrap confidence
// interval of the median of v (Efron and Tibshirani, "An Introduction to
// the Bootstrap", 1993, §13.3): the 2.5 % and 97.5 % quantiles of the
// medians of b resamples of v drawn with replacement, from a PCG stream
// seeded with seed. One value gives [v, v]; none gives [0, 0]. v is not
// modified.
func bootstrapMedianCI(v []float64, b int, seed uint64) (lo, hi float64) {
	switch len(v) {
	case 0:
		return 0, 0
	case 1:
		return v[0], v[0]
	}
	rng := rand.New(rand.NewPCG(seed, 0x626f6f74)) // "boot"
	meds := make([]float64, b)
	s := make([]float64, len(v))
	for i := range meds {
		for j := range s {
			s[j] = v[rng.IntN(len(v))]
		}
		slices.Sort(s)
		meds[i] = median(s)
	}
	slices.Sort(meds)
	return quantileLinear(meds, 0.025), quantileLinear(meds, 0.975)
}

// quantileLinear returns the q-quantile of sorted by linear interpolation
// between order statistics (Hyndman and Fan type 7), or 0.
func quantileLinear(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	pos := min(max(q, 0), 1) * float64(n-1)
	i := int(pos)
	if i >= n-1 {
		return sorted[n-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// medianResult returns a result of the same type as runs whose every
// number is the median over runs of that number (by JSON field, nested
// objects and equal-length arrays included; integral numbers stay
// integral, rounded half up; text fields are the first run's), with "runs"
// set to len(runs) and "ci95" to the bootstrap intervals (seeded with
// seed) of every number at or under the JSON paths ciKeys. Unexported
// fields are left zero. runs must not be empty.
func medianResult[T any](runs []T, seed uint64, ciKeys ...string) (T, error) {
	var zero T
	if len(runs) == 0 {
		return zero, fmt.Errorf("median of no runs")
	}
	vals := make([]any, len(runs))
	flat := make([]map[string]float64, len(runs))
	for i, r := range runs {
		b, err := json.Marshal(r)
		if err != nil {
			return zero, err
		}
		if err := json.Unmarshal(b, &vals[i]); err != nil {
			return zero, err
		}
		flat[i] = map[string]float64{}
		flatten(vals[i], "", flat[i])
	}
	med, ok := medianJSON(vals).(map[string]any)
	if !ok {
		return zero, fmt.Errorf("median of %T: not a JSON object", zero)
	}
	ci := ciMap{}
	for path := range flat[0] {
		if !underAny(path, ciKeys) {
			continue
		}
		var v []float64
		for _, f := range flat {
			if x, ok := f[path]; ok {
				v = append(v, x)
			}
		}
		if len(v) == len(runs) {
			lo, hi := bootstrapMedianCI(v, bootstrapResamples, seed)
			ci[path] = [2]float64{lo, hi}
		}
	}
	med["runs"] = len(runs)
	med["ci95"] = ci
	b, err := json.Marshal(med)
	if err != nil {
		return zero, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return zero, fmt.Errorf("median of %T: %w", zero, err)
	}
	return out, nil
}

// underAny reports whether JSON path p is one of keys or under one.
func underAny(p string, keys []string) bool {
	for _, k := range keys {
		if p == k || strings.HasPrefix(p, k+".") {
			return true
		}
	}
	return false
}

// flatten records every number of the JSON value v reachable through
// objects (not arrays) by its dotted path.
func flatten(v any, prefix string, out map[string]float64) {
	switch x := v.(type) {
	case float64:
		out[prefix] = x
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(e, p, out)
		}
	}
}

// medianJSON returns the element-wise median of JSON values of the same
// shape (see medianResult); where the shapes differ, the first value.
func medianJSON(vals []any) any {
	switch first := vals[0].(type) {
	case float64:
		nums := make([]float64, 0, len(vals))
		integral := true
		for _, v := range vals {
			x, ok := v.(float64)
			if !ok {
				return first
			}
			integral = integral && x == math.Trunc(x)
			nums = append(nums, x)
		}
		slices.Sort(nums)
		m := median(nums)
		if integral {
			m = math.Floor(m + 0.5)
		}
		return m
	case map[string]any:
		out := make(map[string]any, len(first))
		for k, fv := range first {
			col := []any{fv}
			for _, v := range vals[1:] {
				m, ok := v.(map[string]any)
				if !ok {
					return first
				}
				if e, ok := m[k]; ok {
					col = append(col, e)
				}
			}
			out[k] = medianJSON(col)
		}
		return out
	case []any:
		for _, v := range vals[1:] {
			a, ok := v.([]any)
			if !ok || len(a) != len(first) {
				return first
			}
		}
		out := make([]any, len(first))
		for i := range first {
			col := make([]any, len(vals))
			for j, v := range vals {
				col[j] = v.([]any)[i]
			}
			out[i] = medianJSON(col)
		}
		return out
	}
	return vals[0]
}
