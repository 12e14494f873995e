package bench

// The steady-links case of scenario capacity: the same flows as the
// traces' configurations, over three links whose capacity never changes,
// so that "the bond carries the sum of its links" is a number a user can
// check by hand before trusting the traces.
//
//   - steady-udp: 1200-byte UDP packets offered at Σ capacity (50 Mbit/s);
//   - steady-udp-90: the same at 0.9 × Σ (45 Mbit/s), where
//     retransmission and FEC must cover the links' random loss;
//   - steady-tcp: one TCP flow (iperf3) over the bond;
//   - steady-single-<path>-tcp: the same TCP flow over that link alone.
//
// The links are sized so that the 2-core machine the evaluation runs on
// forwards their packet rate with room to spare (about 5,200 packets/s at
// Σ capacity).

import (
	"fmt"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
)

// Steady configuration names.
const (
	capSteadyUDP   = "steady-udp"
	capSteadyUDP90 = "steady-udp-90"
	capSteadyTCP   = "steady-tcp"
	// steadyPrefix starts the name of every steady configuration.
	steadyPrefix = "steady-"
	// steadySource is what results.json's traces says of the steady links.
	steadySource = "none (steady-*: constant links)"
)

// steadyQueueDelay bounds each steady link's drop-tail queue: 100 ms of
// its rate (375 kB at 30 Mbit/s, 62.5 kB at 5 Mbit/s), as the S2 links'.
const steadyQueueDelay = 100 * time.Millisecond

// steadyLink is one constant link of the steady case; both directions
// are the same.
type steadyLink struct {
	name  string
	rate  emu.BitRate   // bottleneck capacity, bits/s
	delay time.Duration // one-way delay, each direction
	loss  float64       // Bernoulli loss probability, each direction, [0, 1]
}

// steadyLinks are the three links of the steady case (issue 36): 30, 15
// and 5 Mbit/s; 20, 40 and 60 ms one way; 0, 1 and 3 % random loss.
var steadyLinks = []steadyLink{
	{"fast", 30 * emu.Mbps, 20 * time.Millisecond, 0},
	{"mid", 15 * emu.Mbps, 40 * time.Millisecond, 0.01},
	{"slow", 5 * emu.Mbps, 60 * time.Millisecond, 0.03},
}

// steadyScenario returns the steady links as a scenario, their capacity
// scaled by o.LinkScale as the traces' are. Errors: a LinkScale out of
// range.
func steadyScenario(o Options) (emu.Scenario, error) {
	sc := emu.Scenario{Name: "steady", Source: steadySource}
	for _, l := range steadyLinks {
		lc := emu.LinkConfig{Rate: l.rate, Delay: l.delay, Loss: l.loss, QueueDelay: steadyQueueDelay}
		sc.Paths = append(sc.Paths, emu.PathModel{
			Name:   l.name,
			Labels: map[string]string{"link_type": "terrestrial"},
			Up:     lc, Down: lc,
		})
	}
	if o.LinkScale != 0 {
		return sc.ScaleCapacity(o.LinkScale)
	}
	return sc, nil
}

// steadyCapConfigs lists the steady configurations in the order they run,
// after the traces' ones.
func steadyCapConfigs() []capConfig {
	cs := []capConfig{
		{name: capSteadyUDP, desc: "UDP at Σ capacity over the bond of three constant links", single: -1, steady: true},
		{name: capSteadyUDP90, desc: "UDP at 0.9 × Σ capacity over the bond of three constant links", single: -1, steady: true, offer: 0.9},
		{name: capSteadyTCP, desc: "one TCP flow (iperf3) over the bond of three constant links", tcp: true, single: -1, steady: true},
	}
	for i, l := range steadyLinks {
		cs = append(cs, capConfig{name: steadyPrefix + "single-" + l.name + "-tcp",
			desc: fmt.Sprintf("one TCP flow over the constant link %s alone (%v, %d ms one way, %g %% loss)", l.name, l.rate, l.delay.Milliseconds(), 100*l.loss),
			tcp:  true, single: i, steady: true})
	}
	return cs
}

// isSteady reports whether configuration name runs on the steady links.
func isSteady(name string) bool { return strings.HasPrefix(name, steadyPrefix) }

// capTraces lists what the configurations o selects replay, for
// results.json: sc's trace files when a traces' configuration runs, and
// steadySource when a steady one does.
func capTraces(o Options, sc emu.Scenario) []string {
	var traces, steady bool
	for _, c := range capConfigs(sc) {
		if o.selected(c.name) {
			steady = steady || c.steady
			traces = traces || !c.steady
		}
	}
	var out []string
	if traces {
		out = scenarioTraces(sc, o.Traces)
	}
	if steady {
		out = append(out, steadySource)
	}
	return out
}

// steadyGoal is one target of the steady case, on one configuration.
type steadyGoal struct {
	config  string
	name    string                   // the target's name in the results
	atLeast bool                     // met when got ≥ bound; else when got ≤ bound
	bound   float64                  // in got's unit
	got     func(*capResult) float64 // the measure, from the configuration's medians
}

// steadyGoals are issue 36's targets of the steady links: steady-udp
// delivers ≥ 0.95 × Σ capacity; steady-udp-90 loses ≤ 0.1 % end to end
// (retransmission and FEC cover the links' random loss); steady-tcp
// delivers ≥ 0.70 × Σ capacity (Σ / best single link = 50 / 30 = 1.67).
var steadyGoals = []steadyGoal{
	{capSteadyUDP, "steady-udp delivered / Σ capacity", true, 0.95, func(c *capResult) float64 { return c.Delivered }},
	{capSteadyUDP90, "steady-udp-90 end-to-end loss, %", false, 0.1, func(c *capResult) float64 { return 100 * c.LossRate }},
	{capSteadyTCP, "steady-tcp delivered / Σ capacity", true, 0.70, func(c *capResult) float64 { return c.Delivered }},
}

// want renders the goal's bound for the targets table.
func (g *steadyGoal) want() string {
	if g.atLeast {
		return fmt.Sprintf("≥ %g", g.bound)
	}
	return fmt.Sprintf("≤ %g", g.bound)
}

// steadyTargets evaluates steadyGoals on cs (medians, one entry per
// configuration) and returns them in steadyGoals' order. A goal whose
// configuration is absent or skipped is returned with Known false. It
// also sets each evaluated configuration's Target, so that results.json
// carries the verdict beside the figures.
func steadyTargets(cs []capResult) []target {
	var ts []target
	for _, g := range steadyGoals {
		t := target{Name: g.name, Want: g.want()}
		for i := range cs {
			c := &cs[i]
			if c.Name != g.config || c.Skipped != "" || c.CapacityMbps <= 0 {
				continue
			}
			t.Known, t.Got = true, g.got(c)
			if g.atLeast {
				t.Met = t.Got >= g.bound
			} else {
				t.Met = t.Got <= g.bound
			}
			ct := t
			c.Target = &ct
		}
		ts = append(ts, t)
	}
	return ts
}

// capAllTargets returns the targets of the configurations in cs: the
// traces' (capTargets) unless only steady ones ran, and the steady ones'
// (steadyTargets, which sets their Target) when any ran.
func capAllTargets(cs []capResult) []target {
	var traces, steady bool
	for _, c := range cs {
		steady = steady || isSteady(c.Name)
		traces = traces || !isSteady(c.Name)
	}
	var ts []target
	if traces || !steady {
		ts = capTargets(cs)
	}
	if steady {
		ts = append(ts, steadyTargets(cs)...)
	}
	return ts
}

// steadyMarkdown renders the steady configurations of cs as their own
// table, each with its target and whether it passed; "" when none ran.
func steadyMarkdown(cs []capResult) string {
	var b strings.Builder
	for _, c := range cs {
		if !isSteady(c.Name) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nSteady links: " + steadyLinksText() + ".\n\n")
			b.WriteString("| configuration | runs | Σ capacity Mbit/s | offered Mbit/s | delivered Mbit/s | delivered / Σ | loss % | OWD p50 ms | p95 ms | CPU cores | share of bytes sent | target | result |\n")
			b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
		}
		if c.Skipped != "" {
			fmt.Fprintf(&b, "| %s | — | — | — | — | — | — | — | — | — | skipped: %s | — | — |\n", c.Name, c.Skipped)
			continue
		}
		offered, loss, owd := "—", "—", "— | —"
		if c.OWDms != nil {
			offered = fmt.Sprintf("%.2f", c.OfferedMbps)
			loss = fmt.Sprintf("%.3f", 100*c.LossRate)
			owd = fmt.Sprintf("%.1f | %.1f", c.OWDms.P50, c.OWDms.P95)
		}
		var ps []string
		for _, p := range c.PathsMbps {
			ps = append(ps, fmt.Sprintf("%s %.2f", p.Name, p.Share))
		}
		want, result := "—", "—"
		if t := c.Target; t != nil {
			want, result = t.Name+" "+t.Want, fmt.Sprintf("fail (%.4g)", t.Got)
			if t.Met {
				result = fmt.Sprintf("pass (%.4g)", t.Got)
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %s | %.2f%s | %.3f | %s | %s | %.2f | %s | %s | %s |\n", c.Name, max(1, c.Runs), c.CapacityMbps, offered,
			c.GoodputMbps, c.CI95.text("goodput_mbps"), c.Delivered, loss, owd, c.CPUCores, strings.Join(ps, ", "), want, result)
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteString("\nThe steady links have constant capacity, delay and random loss in both directions, and drop-tail queues of 100 ms. " +
		"Σ capacity counts IP bytes on the links; UDP delivered counts the inner 1200-byte IP packets received, so bondd's and QUIC's " +
		"headers, FEC parity and retransmissions come out of the same capacity. Loss is end to end: inner packets sent and never received.\n")
	return b.String()
}

// steadyLinksText describes the steady links in one line.
func steadyLinksText() string {
	var ls []string
	for _, l := range steadyLinks {
		ls = append(ls, fmt.Sprintf("%s %v, %d ms one way, %g %% random loss", l.name, l.rate, l.delay.Milliseconds(), 100*l.loss))
	}
	return strings.Join(ls, "; ")
}
