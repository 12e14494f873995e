package policy

import (
	"testing"
	"time"

	"github.com/bondd/bondd/rules"
)

func TestLEOReconfActive(t *testing.T) {
	minute := time.Date(2025, 3, 5, 12, 30, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return minute.Add(d) }
	ms := time.Millisecond
	var starlink LEOReconf // the zero value: seconds 12, 27, 42, 57, ±100 ms
	custom := LEOReconf{Seconds: []int{0}, Window: 250 * ms}
	tests := []struct {
		l    *LEOReconf
		t    time.Time
		want bool
	}{
		{&starlink, at(12 * time.Second), true},
		{&starlink, at(12*time.Second - 100*ms), true},
		{&starlink, at(12*time.Second + 100*ms), true},
		{&starlink, at(12*time.Second + 101*ms), false},
		{&starlink, at(11*time.Second + 899*ms), false},
		{&starlink, at(57*time.Second + 50*ms), true},
		{&starlink, at(30 * time.Second), false},
		{&starlink, at(0), false},
		{&custom, at(-200 * ms), true}, // wraps around the minute
		{&custom, at(200 * ms), true},
		{&custom, at(300 * ms), false},
		{&custom, time.Unix(-60, 100*1e6), true}, // before 1970
	}
	for _, tt := range tests {
		if got := tt.l.Active(tt.t); got != tt.want {
			t.Errorf("%+v at %s: %v, want %v", *tt.l, tt.t.Format("15:04:05.000"), got, tt.want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { starlink.Active(minute) }); a != 0 {
		t.Fatalf("Active allocates %v times", a)
	}
	for _, bad := range []LEOReconf{{Seconds: []int{60}}, {Seconds: []int{-1}}, {Seconds: []int{12, 27, 12}}, {Window: time.Microsecond}, {Window: 8 * time.Second}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if err := (LEOReconf{Seconds: DefaultLEOSeconds(), Window: DefaultLEOWindow}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestLEOReconfHoldFor(t *testing.T) {
	minute := time.Date(2025, 3, 5, 12, 30, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return minute.Add(d) }
	ms := time.Millisecond
	var starlink LEOReconf // seconds 12, 27, 42, 57; hold 10 ms before to 100 ms after
	custom := LEOReconf{Seconds: []int{0}, Hold: 150 * ms}
	off := LEOReconf{Hold: -1}
	tests := []struct {
		name string
		l    *LEOReconf
		t    time.Time
		want time.Duration
	}{
		{"at the second", &starlink, at(12 * time.Second), 100 * ms},
		{"the lead before it", &starlink, at(12*time.Second - 10*ms), 110 * ms},
		{"before the lead", &starlink, at(12*time.Second - 11*ms), 0},
		{"inside the hold", &starlink, at(27*time.Second + 60*ms), 40 * ms},
		{"at the hold's end", &starlink, at(42*time.Second + 100*ms), 0},
		{"between seconds", &starlink, at(30 * time.Second), 0},
		{"custom hold, across the minute", &custom, at(-5 * ms), 155 * ms},
		{"custom hold, after", &custom, at(149 * ms), ms},
		{"before 1970", &custom, time.Unix(-60, 100*1e6), 50 * ms},
		{"hold off", &off, at(12 * time.Second), 0},
	}
	for _, tt := range tests {
		if got := tt.l.HoldFor(tt.t); got != tt.want {
			t.Errorf("%s: HoldFor = %v, want %v", tt.name, got, tt.want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { starlink.HoldFor(minute) }); a != 0 {
		t.Fatalf("HoldFor allocates %v times", a)
	}
	if (LEOReconf{Hold: 2 * time.Second}).Validate() == nil {
		t.Error("a 2-s hold validated")
	}
	p := NewPath("sat", nil, 64)
	if d := p.LEOHold(at(12 * time.Second)); d != 0 {
		t.Errorf("a path without a marker holds for %v", d)
	}
	p.SetLEOReconf(&starlink)
	if d := p.LEOHold(at(12 * time.Second)); d != 100*ms {
		t.Errorf("a path with the Starlink marker holds for %v at second 12, want 100ms", d)
	}
}

func TestLEOState(t *testing.T) {
	zone := time.Date(2025, 3, 5, 12, 30, 27, 0, time.UTC)
	calm := zone.Add(5 * time.Second)
	sat, ter := NewPath("sat", nil, 8), NewPath("ter", nil, 8)
	paths := []*Path{sat, ter}
	sat.SetLEOReconf(&LEOReconf{})
	if LEOState(paths, zone) != rules.LEONone {
		t.Fatal("a disconnected satellite path raised leo_state")
	}
	sat.SetConnected(true, zone)
	ter.SetConnected(true, zone)
	if LEOState(paths, zone) != rules.LEOReconf {
		t.Fatal("no leo_state=reconf inside the danger zone")
	}
	if LEOState(paths, calm) != rules.LEONone {
		t.Fatal("leo_state=reconf outside the danger zone")
	}
	sat.SetLEOReconf(nil)
	if LEOState(paths, zone) != rules.LEONone {
		t.Fatal("leo_state=reconf without a marker")
	}
}

// TestPickAroundLEOHold: a path holding its frames around a scheduled
// reconfiguration sends nothing until the hold ends, so the default picker
// counts the rest of the hold in its delay and takes a slower path that
// delivers earlier, and the path's expected delivery includes it.
func TestPickAroundLEOHold(t *testing.T) {
	minute := time.Date(2025, 3, 5, 12, 30, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name     string
		at       time.Duration // into the minute
		hold     time.Duration // the LEO path's LEOReconf.Hold
		want     string
		minDeliv time.Duration // the LEO path's expected delivery at least
	}{
		{"outside the hold", 20 * time.Second, 0, "sat", 0},
		{"10 ms before the second: the hold has begun", 12*time.Second - 5*ms, 0, "cell", 100 * ms},
		{"50 ms after the second", 12*time.Second + 50*ms, 0, "cell", 50 * ms},
		{"hold nearly over: the LEO path is earlier again", 12*time.Second + 99*ms, 0, "sat", 0},
		{"no hold (hold < 0)", 12*time.Second + 50*ms, -1, "sat", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := minute.Add(tt.at)
			sat := NewPath("sat", nil, 1000)
			sat.SetLEOReconf(&LEOReconf{Hold: tt.hold})
			cell := NewPath("cell", nil, 1000)
			for _, p := range []*Path{sat, cell} {
				p.SetConnected(true, now)
			}
			sat.OnMetrics(30*ms, 30*ms, 1<<20, 0)
			cell.OnMetrics(70*ms, 70*ms, 1<<20, 0)
			out := make([]int, 2)
			paths := []*Path{sat, cell}
			if n := (LowestRTT{}).Pick(paths, now, out); n != 1 || paths[out[0]].Name != tt.want {
				t.Errorf("picked %v, want %s", out[:n], tt.want)
			}
			if d := sat.expectedDeliveryAt(now); d < tt.minDeliv {
				t.Errorf("the LEO path's expected delivery %v, want at least %v", d, tt.minDeliv)
			}
		})
	}
}
