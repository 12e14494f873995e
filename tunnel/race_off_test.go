//go:build !race

package tunnel

import "time"

const raceEnabled = false

// testSuspectMin is the test bonds' liveness floor: 0, the default.
const testSuspectMin = time.Duration(0)
