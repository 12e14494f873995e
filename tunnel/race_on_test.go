//go:build race

package tunnel

import "time"

// raceEnabled slows everything several fold: timing bounds are logged, not
// asserted.
const raceEnabled = true

// testSuspectMin is the test bonds' liveness floor: under -race the emu
// relays and quic-go stall for longer than the default 100 ms, which makes
// paths SUSPECT that are only slow.
const testSuspectMin = 400 * time.Millisecond
