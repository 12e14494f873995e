//go:build race

package tunnel

// raceEnabled slows everything several fold: timing bounds are logged, not
// asserted.
const raceEnabled = true
