package bench

// Sensitivity of adaptive FEC, paper 1's own future work (§6): the safety
// factor α ∈ {1, 1.5, 2, 3} against the block size k ∈ {10, 20, 40} on S1,
// over the runs' seeds, as residual loss against coding rate (bondd bench
// s1 --sweep). no-fec runs beside the grid, as the loss to beat.
//
// Each block's time budget is max(fec.DefaultBudget, 1.1·k packet
// intervals of the flow), so that a block of the 4 Mbit/s flow fills to k
// before its budget closes it: with the default budget every block would
// close by timer after about 12 packets whatever k is, and the sweep would
// not vary k above that.

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/tunnel"
)

// The sweep grid.
var (
	sweepAlphas = []float64{1, 1.5, 2, 3}
	sweepKs     = []int{10, 20, 40}
)

// sweepName is the configuration name of one grid point ("a1.5-k20").
func sweepName(alpha float64, k int) string { return fmt.Sprintf("a%g-k%d", alpha, k) }

// sweepBudget is the block budget of a grid point with k data packets on
// a flow of rateMbps in packetBytes packets.
func sweepBudget(k int, rateMbps float64, packetBytes int) time.Duration {
	interval := time.Duration(float64(packetBytes*8) / (rateMbps * 1e6) * float64(time.Second))
	return max(fec.DefaultBudget, time.Duration(1.1*float64(k)*float64(interval)))
}

// s1SweepConfigs lists no-fec and the grid, in the order they run.
func s1SweepConfigs() []s1Config {
	cs := []s1Config{{name: s1NoFEC, desc: "no FEC (the loss to beat)", fec: tunnel.FECOptions{Mode: tunnel.FECOff}}}
	for _, a := range sweepAlphas {
		for _, k := range sweepKs {
			b := sweepBudget(k, s1RateMbps, demo.PacketBytes)
			cs = append(cs, s1Config{name: sweepName(a, k), desc: fmt.Sprintf("adaptive FEC, α = %g, k = %d, block budget %s", a, k, b.Round(time.Millisecond)),
				fec: tunnel.FECOptions{Mode: tunnel.FECAdaptive, K: k, Alpha: a, Budget: b}})
		}
	}
	return cs
}

// s1SweepNames lists the sweep's configuration names.
func s1SweepNames() []string {
	var ns []string
	for _, c := range s1SweepConfigs() {
		ns = append(ns, c.name)
	}
	return ns
}

// s1SweepReport is results.json of the sweep.
type s1SweepReport struct {
	benchHeader
	RateMbps    float64    `json:"rate_mbps"`
	PacketBytes int        `json:"packet_bytes"`
	Alphas      []float64  `json:"alphas"`
	Ks          []int      `json:"ks"`
	Configs     []s1Result `json:"configs"`
	// Pareto lists the grid points no other point beats on both loss and
	// coding rate (lower loss at a coding rate at least as high).
	Pareto []string `json:"pareto"`
}

// runS1Sweep runs the sweep o.runs() times (runs outer) and writes the
// medians, and the Pareto plot data.
func runS1Sweep(ctx context.Context, o Options, out io.Writer) error {
	sc, err := emu.CellularScenario(o.Traces, o.Seed)
	if err != nil {
		return err
	}
	rep := s1SweepReport{benchHeader: o.header(scenarioTraces(sc, o.Traces)), RateMbps: s1RateMbps, PacketBytes: demo.PacketBytes,
		Alphas: sweepAlphas, Ks: sweepKs}
	fmt.Fprintf(out, "bondd bench s1 --sweep: α %v × k %v, %s per configuration, %d run(s) from seed %d\n", sweepAlphas, sweepKs, o.Duration, o.runs(), o.Seed)
	perRun := map[string][]s1Result{}
	for r := range o.runs() {
		ro := o.forRun(r)
		rsc, err := emu.CellularScenario(ro.Traces, ro.Seed)
		if err != nil {
			return err
		}
		for _, c := range s1SweepConfigs() {
			if !o.selected(c.name) {
				continue
			}
			res, mode, err := runS1Config(ctx, ro, rsc, c, out)
			if err != nil {
				return fmt.Errorf("s1 sweep %s (seed %d): %w", c.name, ro.Seed, err)
			}
			rep.Mode = mode
			if c.fec.Mode == tunnel.FECAdaptive {
				res.Alpha, res.K = c.fec.Alpha, c.fec.K
			}
			perRun[c.name] = append(perRun[c.name], res)
		}
	}
	for _, c := range s1SweepConfigs() {
		if runs := perRun[c.name]; len(runs) > 0 {
			res, err := medianResult(runs, o.Seed, "owd_ms", "loss_rate", "coding_rate")
			if err != nil {
				return err
			}
			rep.Configs = append(rep.Configs, res)
		}
	}
	rep.Pareto = paretoFront(rep.Configs)
	if err := writeResults(o.Out, rep, s1SweepMarkdown(&rep), out); err != nil || o.NoPlots {
		return err
	}
	return writePlotsAll(o.Out, Plots{Lines: []LinePlot{sweepPlot(rep.Configs, rep.Pareto)}})
}

// paretoFront returns the names of the FEC configurations of cs that no
// other dominates: none has loss ≤ and coding rate ≥, one of them strictly.
func paretoFront(cs []s1Result) []string {
	var front []string
	for i, a := range cs {
		if a.K == 0 {
			continue
		}
		dominated := false
		for j, b := range cs {
			if i != j && b.K != 0 && b.LossRate <= a.LossRate && b.CodingRate >= a.CodingRate &&
				(b.LossRate < a.LossRate || b.CodingRate > a.CodingRate) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, a.Name)
		}
	}
	return front
}

// sweepPlot is the Pareto plot: loss (%) against coding rate, one line
// per α through its k, the no-fec point and the front.
func sweepPlot(cs []s1Result, front []string) LinePlot {
	p := LinePlot{Name: "s1-sweep-pareto", Title: "S1: residual loss against coding rate (adaptive FEC, α × k; medians over runs)",
		XLabel: "coding rate k/(k+r)", YLabel: "loss (%)"}
	pt := func(c s1Result) [2]float64 { return [2]float64{c.CodingRate, 100 * c.LossRate} }
	for _, a := range sweepAlphas {
		ks := make([]string, len(sweepKs))
		for i, k := range sweepKs {
			ks[i] = fmt.Sprint(k)
		}
		s := LineSeries{Name: fmt.Sprintf("α = %g (k = %s)", a, strings.Join(ks, ", "))}
		for _, c := range cs {
			if c.K != 0 && c.Alpha == a {
				s.Points = append(s.Points, pt(c))
			}
		}
		if len(s.Points) > 0 {
			p.Series = append(p.Series, s)
		}
	}
	var fs LineSeries
	fs.Name = "Pareto front"
	for _, c := range cs {
		if c.K == 0 {
			p.Series = append(p.Series, LineSeries{Name: c.Name, Points: [][2]float64{pt(c)}})
		} else if slices.Contains(front, c.Name) {
			fs.Points = append(fs.Points, pt(c))
		}
	}
	slices.SortFunc(fs.Points, func(a, b [2]float64) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	if len(fs.Points) > 0 {
		p.Series = append(p.Series, fs)
	}
	return p
}

// s1SweepMarkdown renders results.md of the sweep: loss and coding rate
// per α (rows) and k (columns), then the per-point table.
func s1SweepMarkdown(r *s1SweepReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# S1 sensitivity: α × k, %s each, %d run(s), %s\n\n", time.Duration(r.DurationS*float64(time.Second)), r.Runs, r.Mode)
	fmt.Fprintf(&b, "Command: `%s`, commit %s. Medians over the runs; [95 %% bootstrap interval] where there are several. Block budget max(%s, 1.1·k packet intervals), so that blocks fill to k.\n\n", r.Command, r.Commit, fec.DefaultBudget)
	by := map[string]*s1Result{}
	for i := range r.Configs {
		by[r.Configs[i].Name] = &r.Configs[i]
	}
	if nf := by[s1NoFEC]; nf != nil {
		fmt.Fprintf(&b, "no-fec: loss %.2f %%%s, p95 one-way delay %.1f ms.\n\n", 100*nf.LossRate, pctCI(nf.CI95, "loss_rate"), nf.OWDms.P95)
	}
	b.WriteString("Loss % / coding rate:\n\n| α \\ k |")
	for _, k := range r.Ks {
		fmt.Fprintf(&b, " %d |", k)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(r.Ks)) + "\n")
	for _, a := range r.Alphas {
		fmt.Fprintf(&b, "| %g |", a)
		for _, k := range r.Ks {
			c := by[sweepName(a, k)]
			if c == nil {
				b.WriteString(" not run |")
				continue
			}
			fmt.Fprintf(&b, " %.2f / %.3f |", 100*c.LossRate, c.CodingRate)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| configuration | loss % | coding rate | p95 OWD ms | recovered | masked | Pareto |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, c := range r.Configs {
		front := ""
		if slices.Contains(r.Pareto, c.Name) {
			front = "yes"
		}
		fmt.Fprintf(&b, "| %s | %.2f%s | %.3f%s | %.1f | %d | %d | %s |\n", c.Name, 100*c.LossRate, pctCI(c.CI95, "loss_rate"), c.CodingRate, c.CI95.text("coding_rate"),
			c.OWDms.P95, c.Recovered, c.Masking.Masked, front)
	}
	return b.String()
}

// pctCI renders the interval of a ratio key as percent, " [lo, hi]", or "".
func pctCI(m ciMap, key string) string {
	v, ok := m[key]
	if !ok || v[0] == v[1] || math.IsNaN(v[0]) {
		return ""
	}
	return fmt.Sprintf(" [%.2f, %.2f]", 100*v[0], 100*v[1])
}
