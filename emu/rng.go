package emu

import (
	"math"
	"math/rand/v2"
)

// Random streams. Every random process of a Link draws from its own PCG
// stream, so that enabling one process (say jitter) does not shift the
// draws of another (say loss): the loss pattern of a seed stays the same.
const (
	streamLoss uint64 = iota + 1
	streamGE
	streamSeriesLoss
	streamJitter
	streamDelaySamples
	streamOutage
)

// newPCG returns the PCG (math/rand/v2) stream of seed for one process.
func newPCG(seed, stream uint64) rand.PCG {
	return *rand.NewPCG(seed, splitmix64(stream^0x9e3779b97f4a7c15))
}

// unitFloat maps 64 random bits to a float64 in [0, 1).
func unitFloat(x uint64) float64 { return float64(x>>11) * 0x1p-53 }

// splitmix64 is the SplitMix64 finalizer (Steele, Lea, Flood, OOPSLA 2014).
// emu uses it to derive independent, traffic-independent draws from
// (seed, index) pairs, e.g. the outage duration of window i.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashUnit returns a uniform float64 in [0, 1) that depends only on
// (seed, stream, i).
func hashUnit(seed, stream uint64, i int64) float64 {
	return unitFloat(splitmix64(seed ^ splitmix64(stream<<32^uint64(i))))
}

// hashNormal returns a standard normal draw that depends only on
// (seed, stream, i), by the Box–Muller transform of two hashed uniforms.
func hashNormal(seed, stream uint64, i int64) float64 {
	u1 := hashUnit(seed, stream, 2*i)
	u2 := hashUnit(seed, stream, 2*i+1)
	if u1 < 0x1p-53 {
		u1 = 0x1p-53
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// seedFor derives a seed for a named sub-model (a path of a scenario) from
// a parent seed, with FNV-1a over the name.
func seedFor(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return splitmix64(seed ^ h)
}
