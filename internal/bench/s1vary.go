package bench

// Scenario s1-vary: adaptive against fixed FEC at matched overhead where
// loss varies between paths and over time (paper 1's future work). S1's
// three cellular paths, whose loss is a steady random floor, each change
// one way:
//
//   - path 0 ("att") adds Gilbert–Elliott burst loss both ways
//     (varyBursts): mostly good, with bad periods of 50 packets on average
//     that lose half their packets, about 2.4 % in the long run but
//     concentrated in bursts;
//   - path 1 ("tmobile") has a handover-like outage both ways
//     (varyHandover): every 20 s, at second 8, an interruption of 600 ms
//     median (log-normal, 200 ms–1.5 s), the order of a radio-link
//     failure and re-establishment between cells (3GPP TS 36.331 §5.3.7
//     re-establishment; measured LTE handover gaps are tens of ms, failed
//     ones up to seconds);
//   - path 2 stays as in S1.
//
// The configurations are no-fec, adaptive-fec and fixed-fec, fixed at the
// coding rate adaptive-fec reached in the same run (matchedFixed), so that
// both spend the same overhead and only where the parity goes differs.

import (
	"time"

	"github.com/bondd/bondd/emu"
)

// S1Vary is the scenario name.
const S1Vary = "s1-vary"

// varyBursts is path 0's Gilbert–Elliott burst loss: stationary bad share
// 0.001/(0.001+0.02) ≈ 4.8 %, mean bad period 1/0.02 = 50 packets, loss
// 0.5 in the bad state: ≈ 2.4 % lost in the long run.
var varyBursts = emu.GilbertElliott{PGoodBad: 0.001, PBadGood: 0.02, LossGood: 0, LossBad: 0.5}

// varyHandover is path 1's handover-like outage schedule.
var varyHandover = emu.Outages{Period: 20 * time.Second, At: []time.Duration{8 * time.Second},
	Median: 600 * time.Millisecond, Min: 200 * time.Millisecond, Max: 1500 * time.Millisecond, Sigma: 0.5}

// s1VaryNames are the configurations s1-vary runs, in order (a subset of
// s1Configs).
func s1VaryNames() []string { return []string{s1NoFEC, s1Adaptive, s1Fixed} }

// varyScenario returns S1's cellular scenario for seed with the s1-vary
// changes.
func varyScenario(tracesDir string, seed uint64) (emu.Scenario, error) {
	sc, err := emu.CellularScenario(tracesDir, seed)
	if err != nil {
		return sc, err
	}
	sc.Name = S1Vary
	if len(sc.Paths) > 0 {
		ge := varyBursts
		sc.Paths[0].Up.GilbertElliott, sc.Paths[0].Down.GilbertElliott = &ge, &ge
	}
	if len(sc.Paths) > 1 {
		out := varyHandover
		sc.Paths[1].Up.Outages, sc.Paths[1].Down.Outages = &out, &out
	}
	return sc, nil
}
