package emu

import (
	"math"
	"math/rand/v2"
)

// GilbertElliott is the two-state burst-loss model of Gilbert (1960) and
// Elliott (1963). The channel is either good or bad; each packet is lost
// with the loss probability of the current state, and then the state moves
// on (good→bad with PGoodBad, bad→good with PBadGood). This is the
// per-packet form Linux netem implements as "loss gemodel p r 1-h 1-k".
// A Link starts in the good state.
//
// The stationary share of packets seen in the bad state is
// PGoodBad/(PGoodBad+PBadGood), the mean bad-burst length is 1/PBadGood
// packets, and the long-run loss rate is [GilbertElliott.StationaryLoss].
// All fields are probabilities in [0, 1].
type GilbertElliott struct {
	PGoodBad float64 // p: probability of good→bad after a packet
	PBadGood float64 // r: probability of bad→good after a packet
	LossGood float64 // loss probability in the good state (netem 1-k)
	LossBad  float64 // loss probability in the bad state (netem 1-h)
}

// StationaryLoss returns the long-run loss rate πG·LossGood + πB·LossBad,
// with πB = PGoodBad/(PGoodBad+PBadGood). With both transition
// probabilities zero the chain stays good and the result is LossGood.
func (g GilbertElliott) StationaryLoss() float64 {
	if g.PGoodBad+g.PBadGood == 0 {
		return g.LossGood
	}
	pb := g.PGoodBad / (g.PGoodBad + g.PBadGood)
	return (1-pb)*g.LossGood + pb*g.LossBad
}

func (g GilbertElliott) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"p_good_bad", g.PGoodBad}, {"p_bad_good", g.PBadGood}, {"loss_good", g.LossGood}, {"loss_bad", g.LossBad}} {
		if !isProb(f.v) {
			return invalidf("gilbert-elliott %s = %v, want a probability in [0, 1]", f.name, f.v)
		}
	}
	return nil
}

// geState is the running state of a GilbertElliott chain.
type geState struct {
	bad bool
	rng rand.PCG
}

// step decides the loss of one packet and advances the chain.
func (s *geState) step(g *GilbertElliott) (lost bool) {
	if s.bad {
		lost = unitFloat(s.rng.Uint64()) < g.LossBad
		if unitFloat(s.rng.Uint64()) < g.PBadGood {
			s.bad = false
		}
	} else {
		lost = unitFloat(s.rng.Uint64()) < g.LossGood
		if unitFloat(s.rng.Uint64()) < g.PGoodBad {
			s.bad = true
		}
	}
	return lost
}

func isProb(v float64) bool { return v >= 0 && v <= 1 && !math.IsNaN(v) }
