package emu

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var printFit = flag.Bool("emu.printfit", false, "print the fitted built-in model block of builtin.go")

// idleMbps is the capacity below which a second counts as idle.
const idleMbps = 0.1

// fitCapacity fits a capacityFit to per-second capacities (Mbit/s).
func fitCapacity(source string, mbps []float64) capacityFit {
	c := capacityFit{source: source, seconds: len(mbps)}
	var sum float64
	var busy []float64
	idle, runs := 0, 0
	for i, v := range mbps {
		sum += v
		if v < idleMbps {
			idle++
			if i == 0 || mbps[i-1] >= idleMbps {
				runs++
			}
		} else {
			busy = append(busy, v)
		}
	}
	c.meanMbps = sum / float64(len(mbps))
	c.idleShare = float64(idle) / float64(len(mbps))
	if runs > 0 {
		c.idleRunS = float64(idle) / float64(runs)
	}
	sorted := slices.Clone(busy)
	slices.Sort(sorted)
	for i := range c.quantMbps {
		c.quantMbps[i] = quantile7(sorted, float64(i)/20)
	}
	// Normal scores by mid-rank (ties share the average rank).
	score := make(map[float64]float64, len(sorted))
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		rank := float64(i+j+1) / 2 // 1-based average rank
		score[sorted[i]] = math.Sqrt2 * math.Erfinv(2*(rank-0.5)/float64(len(sorted))-1)
		i = j
	}
	var xs, ys []float64
	for i := 0; i+1 < len(mbps); i++ {
		if mbps[i] >= idleMbps && mbps[i+1] >= idleMbps {
			xs = append(xs, score[mbps[i]])
			ys = append(ys, score[mbps[i+1]])
		}
	}
	c.lag1 = pearson(xs, ys)
	return c
}

// quantile7 is the type-7 (linear) sample quantile of sorted data.
func quantile7(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	h := p * float64(len(sorted)-1)
	i := int(h)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (h-float64(i))*(sorted[i+1]-sorted[i])
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

func quantTable(v []float64) [21]float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	var q [21]float64
	for i := range q {
		q[i] = quantile7(s, float64(i)/20)
	}
	return q
}

// mahimahiSeconds returns the capacity of each whole second of a trace.
func mahimahiSeconds(tr *MahimahiTrace) []float64 {
	n := int(tr.Period() / time.Second)
	counts := make([]int, n)
	for _, o := range tr.Opportunities {
		if s := int(o / 1000); s < n {
			counts[s]++
		}
	}
	out := make([]float64, n)
	for i, c := range counts {
		out[i] = float64(c) * 1500 * 8 / 1e6
	}
	return out
}

// fitted is the whole set of fitted numbers.
type fitted struct {
	att, tmobile, verizon, lagosUp, lagosDown capacityFit
	rttSprint, rttTMobile, rttVerizon         rttFit
	owdUp, owdDown                            quantFit
	loss                                      lossFloorFit
}

func computeFit(t *testing.T, dir string) fitted {
	t.Helper()
	var f fitted
	mm := func(name string) capacityFit {
		rel := "cellular/mahimahi/" + name
		tr, err := LoadMahimahi(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return fitCapacity(rel, mahimahiSeconds(tr))
	}
	f.att = mm("ATT-LTE-driving.down")
	f.tmobile = mm("TMobile-LTE-driving.down")
	f.verizon = mm("Verizon-LTE-short.down")

	rttRel := "cellular/5gophers/all-carriers-rtt.csv"
	rtt := func(carrier string) rttFit {
		d, err := LoadRTTSamples(filepath.Join(dir, filepath.FromSlash(rttRel)), carrier, rttLocation)
		if err != nil {
			t.Fatal(err)
		}
		ms := make([]float64, len(d))
		for i, x := range d {
			ms[i] = x.Seconds() * 1000
		}
		r := rttFit{source: rttRel + " (" + rttLocation + ")", carrier: carrier, n: len(ms), quantMs: quantTable(ms)}
		r.meanMs, r.sdMs = meanSD(ms)
		return r
	}
	f.rttSprint, f.rttTMobile, f.rttVerizon = rtt("SPRINT"), rtt("TMOBILE"), rtt("VERIZON")

	lagosRel := "leo/starlink-100ms-lagos/lagos.csv"
	f.loss.source = lagosRel
	for _, d := range []Direction{Up, Down} {
		s, err := LoadStarlinkCSV(filepath.Join(dir, filepath.FromSlash(lagosRel)), d)
		if err != nil {
			t.Fatal(err)
		}
		// Per-second capacity: mean of each whole second's rows.
		per := int(time.Second / s.Interval)
		var secs []float64
		for i := 0; i+per <= s.Len(); i += per {
			var sum float64
			for _, r := range s.Rate[i : i+per] {
				sum += float64(r) / 1e6
			}
			secs = append(secs, sum/float64(per))
		}
		capFit := fitCapacity(lagosRel+" ("+d.String()+"link)", secs)
		owd := make([]float64, s.Len())
		for i, o := range s.OWD {
			owd[i] = o.Seconds() * 1000
		}
		q := quantFit{source: lagosRel + " (" + d.String() + "link)", quantMs: quantTable(owd)}
		q.meanMs, _ = meanSD(owd)
		// Loss outside / inside the reconfiguration windows: the 1 s from
		// second 12 of each 15-s cycle (row time mod 15 s in [12, 13) s).
		var outSum, inSum float64
		var outN, inN int
		for i, l := range s.Loss {
			pos := (time.Duration(i) * s.Interval) % (15 * time.Second)
			if pos >= 12*time.Second && pos < 13*time.Second {
				inSum += l
				inN++
			} else {
				outSum += l
				outN++
			}
		}
		if d == Up {
			f.lagosUp, f.owdUp = capFit, q
			f.loss.up, f.loss.upReco = outSum/float64(outN), inSum/float64(inN)
		} else {
			f.lagosDown, f.owdDown = capFit, q
			f.loss.down, f.loss.downReco = outSum/float64(outN), inSum/float64(inN)
		}
	}
	return f
}

// TestBuiltinFit recomputes the built-in model numbers from the trace
// files and checks that builtin.go still holds them (to the 6 significant
// digits it is written with).
func TestBuiltinFit(t *testing.T) {
	dir := tracesDirOrSkip(t)
	f := computeFit(t, dir)
	if *printFit {
		fmt.Fprint(os.Stdout, f.goSource())
	}
	cmpCap := func(name string, got, want capacityFit) {
		if got.source != want.source || got.seconds != want.seconds {
			t.Errorf("%s: source/seconds %q %d, builtin.go has %q %d", name, got.source, got.seconds, want.source, want.seconds)
		}
		cmpF(t, name+".meanMbps", got.meanMbps, want.meanMbps)
		cmpF(t, name+".idleShare", got.idleShare, want.idleShare)
		cmpF(t, name+".idleRunS", got.idleRunS, want.idleRunS)
		cmpF(t, name+".lag1", got.lag1, want.lag1)
		for i := range got.quantMbps {
			cmpF(t, fmt.Sprintf("%s.quantMbps[%d]", name, i), got.quantMbps[i], want.quantMbps[i])
		}
	}
	cmpCap("builtinATT", f.att, builtinATT)
	cmpCap("builtinTMobile", f.tmobile, builtinTMobile)
	cmpCap("builtinVerizon", f.verizon, builtinVerizon)
	cmpCap("builtinLagosUp", f.lagosUp, builtinLagosUp)
	cmpCap("builtinLagosDown", f.lagosDown, builtinLagosDown)
	cmpRTT := func(name string, got, want rttFit) {
		if got.source != want.source || got.carrier != want.carrier || got.n != want.n {
			t.Errorf("%s: %q %q %d, builtin.go has %q %q %d", name, got.source, got.carrier, got.n, want.source, want.carrier, want.n)
		}
		cmpF(t, name+".meanMs", got.meanMs, want.meanMs)
		cmpF(t, name+".sdMs", got.sdMs, want.sdMs)
		for i := range got.quantMs {
			cmpF(t, fmt.Sprintf("%s.quantMs[%d]", name, i), got.quantMs[i], want.quantMs[i])
		}
	}
	cmpRTT("builtinRTTSprint", f.rttSprint, builtinRTTSprint)
	cmpRTT("builtinRTTTMobile", f.rttTMobile, builtinRTTTMobile)
	cmpRTT("builtinRTTVerizon", f.rttVerizon, builtinRTTVerizon)
	cmpQ := func(name string, got, want quantFit) {
		cmpF(t, name+".meanMs", got.meanMs, want.meanMs)
		for i := range got.quantMs {
			cmpF(t, fmt.Sprintf("%s.quantMs[%d]", name, i), got.quantMs[i], want.quantMs[i])
		}
	}
	cmpQ("builtinLagosOWDUp", f.owdUp, builtinLagosOWDUp)
	cmpQ("builtinLagosOWDDown", f.owdDown, builtinLagosOWDDown)
	cmpF(t, "builtinLossFloor.up", f.loss.up, builtinLossFloor.up)
	cmpF(t, "builtinLossFloor.down", f.loss.down, builtinLossFloor.down)
	cmpF(t, "builtinLossFloor.upReco", f.loss.upReco, builtinLossFloor.upReco)
	cmpF(t, "builtinLossFloor.downReco", f.loss.downReco, builtinLossFloor.downReco)

	// Cross-checks against the shared data README (computed there with
	// python3): mean capacities 5.17, 12.77, 5.03 Mbit/s; RTT means (all
	// locations) are checked in TestSeriesRealTraces.
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{{"ATT", f.att.meanMbps, 5.17}, {"TMobile", f.tmobile.meanMbps, 12.77}, {"Verizon", f.verizon.meanMbps, 5.03}} {
		if math.Abs(c.got-c.want) > 0.06 {
			t.Errorf("%s mean %.3f Mbit/s, README says %.2f", c.name, c.got, c.want)
		}
	}
	// README: uplink loss 0.61 % outside and 7.91 % inside the
	// reconfiguration window; downlink 0.74 % and 1.34 %.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"up floor", f.loss.up, 0.0061}, {"up reconf", f.loss.upReco, 0.0791}, {"down floor", f.loss.down, 0.0074}, {"down reconf", f.loss.downReco, 0.0134}} {
		if math.Abs(c.got-c.want) > 0.0002 {
			t.Errorf("lagos %s loss %.5f, README says %.4f", c.name, c.got, c.want)
		}
	}
}

// cmpF compares to 6 significant digits (the precision of builtin.go).
func cmpF(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 5e-6*math.Max(math.Abs(got), 1e-3) {
		t.Errorf("%s = %.6g from the traces, builtin.go has %.6g", name, got, want)
	}
}

func (f *fitted) goSource() string {
	var b strings.Builder
	g := func(v float64) string { return fmt.Sprintf("%.6g", v) }
	arr := func(q [21]float64) string {
		s := make([]string, len(q))
		for i, v := range q {
			s[i] = g(v)
		}
		return "{" + strings.Join(s, ", ") + "}"
	}
	capf := func(name, comment string, c capacityFit) {
		fmt.Fprintf(&b, "\t// %s\n", comment)
		fmt.Fprintf(&b, "\t%s = capacityFit{\n\t\tsource: %q, seconds: %d,\n\t\tmeanMbps: %s, idleShare: %s, idleRunS: %s, lag1: %s,\n\t\tquantMbps: [21]float64%s,\n\t}\n",
			name, c.source, c.seconds, g(c.meanMbps), g(c.idleShare), g(c.idleRunS), g(c.lag1), arr(c.quantMbps))
	}
	rttf := func(name, comment string, r rttFit) {
		fmt.Fprintf(&b, "\t// %s\n", comment)
		fmt.Fprintf(&b, "\t%s = rttFit{\n\t\tsource: %q, carrier: %q, n: %d,\n\t\tmeanMs: %s, sdMs: %s,\n\t\tquantMs: [21]float64%s,\n\t}\n",
			name, r.source, r.carrier, r.n, g(r.meanMs), g(r.sdMs), arr(r.quantMs))
	}
	qf := func(name, comment string, q quantFit) {
		fmt.Fprintf(&b, "\t// %s\n", comment)
		fmt.Fprintf(&b, "\t%s = quantFit{\n\t\tsource: %q, meanMs: %s,\n\t\tquantMs: [21]float64%s,\n\t}\n", name, q.source, g(q.meanMs), arr(q.quantMs))
	}
	b.WriteString("// BEGIN FITTED (generated by TestBuiltinFit -emu.printfit; do not edit by hand)\nvar (\n")
	capf("builtinATT", "Path \"att\": Mahimahi ATT-LTE-driving.down (Saturator, Boston-area driving).", f.att)
	capf("builtinTMobile", "Path \"tmobile\": Mahimahi TMobile-LTE-driving.down.", f.tmobile)
	capf("builtinVerizon", "Path \"verizon\": Mahimahi Verizon-LTE-short.down.", f.verizon)
	capf("builtinLagosUp", "Starlink uplink capacity, per second (Pan/Zhao/Cai lagos trace).", f.lagosUp)
	capf("builtinLagosDown", "Starlink downlink capacity, per second.", f.lagosDown)
	b.WriteString("\n")
	rttf("builtinRTTSprint", "Base RTT of path \"att\" (AT&T is not in 5Gophers; Sprint stands in).", f.rttSprint)
	rttf("builtinRTTTMobile", "Base RTT of path \"tmobile\".", f.rttTMobile)
	rttf("builtinRTTVerizon", "Base RTT of path \"verizon\".", f.rttVerizon)
	b.WriteString("\n")
	qf("builtinLagosOWDUp", "Starlink uplink one-way delay per 100-ms row, ms.", f.owdUp)
	qf("builtinLagosOWDDown", "Starlink downlink one-way delay per 100-ms row, ms.", f.owdDown)
	b.WriteString("\n")
	fmt.Fprintf(&b, "\t// Random-loss floor: Starlink loss outside the reconfiguration windows. The\n")
	fmt.Fprintf(&b, "\t// cellular traces carry no loss at all, so the cellular paths borrow\n")
	fmt.Fprintf(&b, "\t// this floor, the only wireless loss measurement in the shared data.\n")
	fmt.Fprintf(&b, "\tbuiltinLossFloor = lossFloorFit{\n\t\tsource: %q,\n\t\tup: %s, down: %s, upReco: %s, downReco: %s,\n\t}\n)\n\n// END FITTED\n",
		f.loss.source, g(f.loss.up), g(f.loss.down), g(f.loss.upReco), g(f.loss.downReco))
	return b.String()
}
