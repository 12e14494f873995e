package tunnel

import (
	"testing"
	"time"
)

func TestLaneMayHand(t *testing.T) {
	cases := []struct {
		name                   string
		unsent, cwnd, inflight int64
		srtt                   time.Duration
		suspect                bool
		want                   bool
	}{
		{"empty queue always", 0, 10_000, 20_000, 0, false, true},
		{"below the minimum always", laneMinUnsent - 1, 10_000, 20_000, 0, false, true},
		{"no window yet", 10, 0, 0, 0, false, true},
		{"window has room", 4, 100_000, 10_000, 0, false, true},
		{"window full", 4, 14_000, 10_000, 0, false, false},
		{"never past the cap", laneMaxUnsent, 1 << 30, 0, 0, false, false},
		{"never on a suspect path", 0, 100_000, 0, 0, true, false},
		{"within the queue-delay limit", 4, 100_000, 0, 50 * time.Millisecond, false, true},
		// 100 kB per 1 s is 20 kB per 200 ms: 15 packets of 1400 bytes wait longer.
		{"past the queue-delay limit", 15, 100_000, 0, time.Second, false, false},
	}
	for _, c := range cases {
		p := &path{bond: &Bond{popts: PathOptions{MaxQueueDelay: 200 * time.Millisecond}}}
		l := lane{path: p}
		p.gated.Store(c.suspect)
		l.unsent.Store(c.unsent)
		l.cwnd.Store(c.cwnd)
		l.inflight.Store(c.inflight)
		l.srtt.Store(int64(c.srtt))
		if got := l.mayHand(); got != c.want {
			t.Errorf("%s: mayHand = %v, want %v", c.name, got, c.want)
		}
	}
}
