package emu

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// Parameters of the paper-like LEO scenario (LEOPaperScenario).
const (
	// PaperSatOWDLow and PaperSatOWDHigh are the one-way delays the
	// Starlink trace's 5th and 95th delay percentiles are mapped to: a
	// bent-pipe Starlink path of 40–80 ms RTT, inside the 25–80 ms RTT
	// of MoMQ's testbed (paper 2, §5.1).
	PaperSatOWDLow  = 20 * time.Millisecond
	PaperSatOWDHigh = 40 * time.Millisecond
	// PaperMeteredDelay is the metered path's base one-way delay.
	PaperMeteredDelay = 15 * time.Millisecond
	// paperMeteredTrace is the Mahimahi trace the metered path replays.
	paperMeteredTrace = "TMobile-LTE-driving.down"
)

// RebaseDelays maps one-way delays linearly so that their 5th percentile
// becomes lo and their 95th percentile hi, keeping their order and their
// pattern over time (a delay step at a reconfiguration stays a step,
// scaled); values below the 5th percentile shrink toward 0 but never go
// below it. With every delay equal, each becomes lo. d is not modified.
func RebaseDelays(d []time.Duration, lo, hi time.Duration) []time.Duration {
	if len(d) == 0 {
		return nil
	}
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) float64 { return float64(s[min(len(s)-1, int(p*float64(len(s)-1)+0.5))]) }
	p5, p95 := q(0.05), q(0.95)
	scale := 0.0
	if p95 > p5 {
		scale = float64(hi-lo) / (p95 - p5)
	}
	out := make([]time.Duration, len(d))
	for i, v := range d {
		out[i] = max(0, time.Duration(float64(lo)+(float64(v)-p5)*scale))
	}
	return out
}

// LEOPaperScenario returns scenario S2 in the setting of paper 2's
// testbed (MoMQ §5.1: a Starlink path of 25–80 ms RTT and 50–200 Mbit/s
// with its 15-s reconfigurations, and a real metered link), paths
// "starlink" and "metered":
//
//   - starlink: LEOScenario's Starlink path (the Lagos 100-ms trace's
//     capacity and loss per 100 ms, its reconfiguration loss and delay
//     pattern, the outage model at seconds 12/27/42/57, WallClock), with
//     the trace's one-way delay rebased by [RebaseDelays] to
//     [PaperSatOWDLow]–[PaperSatOWDHigh]: the Lagos trace is the
//     inter-satellite-link case (≈ 87 ms one way), the paper's dish a
//     bent pipe. Without traces the built-in delay samples are rebased the
//     same way.
//   - metered: the Mahimahi TMobile-LTE-driving trace (both directions,
//     its .down file, as CellularScenario does; 12.8 Mbit/s mean, 2.9
//     p5), a base one-way delay of [PaperMeteredDelay], and the drop-tail
//     queue of [CellularQueueBytes] (mm-link's droptail packets=100),
//     from a seed-chosen offset; no loss beyond the queue's. Without
//     traces, the built-in T-Mobile capacity model.
//
// Errors are those of LEOScenario and of reading the Mahimahi file.
func LEOPaperScenario(tracesDir string, seed uint64) (Scenario, error) {
	sc, err := LEOScenario(tracesDir, seed)
	if err != nil {
		return sc, err
	}
	sc.Name = "leo-paper"
	sat := &sc.Paths[0]
	for _, l := range []*LinkConfig{&sat.Up, &sat.Down} {
		if l.Series != nil && l.Series.OWD != nil {
			s := *l.Series
			s.OWD = RebaseDelays(s.OWD, PaperSatOWDLow, PaperSatOWDHigh)
			s.Name += fmt.Sprintf(" (delay rebased to %v–%v)", PaperSatOWDLow, PaperSatOWDHigh)
			l.Series = &s
		}
		if len(l.DelaySamples) > 0 {
			l.DelaySamples = RebaseDelays(l.DelaySamples, PaperSatOWDLow, PaperSatOWDHigh)
		}
	}
	met := &sc.Paths[1]
	base := LinkConfig{Delay: PaperMeteredDelay, QueueBytes: CellularQueueBytes}
	rel := filepath.Join("cellular", "mahimahi", paperMeteredTrace)
	if sc.Source != "builtin" && hasFile(tracesDir, rel) {
		mm, err := LoadMahimahi(filepath.Join(tracesDir, rel))
		if err != nil {
			return Scenario{}, fmt.Errorf("emu: LEO paper scenario: %w", err)
		}
		base.Mahimahi = mm
		base.TraceOffset = seededOffset(seed, "metered", mm.Period())
		met.Files = []string{filepath.Join(tracesDir, rel)}
		sc.Source += ", " + rel
	} else {
		base.Series = builtinTMobile.series(seedFor(seed, "metered/capacity"), builtinSeconds, "builtin-metered-tmobile")
	}
	met.Up, met.Down = base, base
	return sc, nil
}
