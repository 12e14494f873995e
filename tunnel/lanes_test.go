package tunnel

import "testing"

func TestLaneMayHand(t *testing.T) {
	cases := []struct {
		name                   string
		unsent, cwnd, inflight int64
		want                   bool
	}{
		{"empty queue always", 0, 10_000, 20_000, true},
		{"below the minimum always", laneMinUnsent - 1, 10_000, 20_000, true},
		{"no window yet", 10, 0, 0, true},
		{"window has room", 4, 100_000, 10_000, true},
		{"window full", 4, 14_000, 10_000, false},
		{"never past the cap", laneMaxUnsent, 1 << 30, 0, false},
	}
	for _, c := range cases {
		var l lane
		l.unsent.Store(c.unsent)
		l.cwnd.Store(c.cwnd)
		l.inflight.Store(c.inflight)
		if got := l.mayHand(); got != c.want {
			t.Errorf("%s: mayHand = %v, want %v", c.name, got, c.want)
		}
	}
}
