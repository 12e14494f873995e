package tunnel

import (
	"reflect"
	"testing"
	"time"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// TestLEOWire checks that an uplink's LEO schedule survives the hello:
// defaults stay defaults, no hold stays no hold.
func TestLEOWire(t *testing.T) {
	ms := time.Millisecond
	for _, l := range []*policy.LEOReconf{
		{},
		{Seconds: []int{12, 27, 42, 57}, Window: 150 * ms, Hold: 80 * ms},
		{Hold: -1}, // no hold: any negative value
	} {
		got := leoFromWire(leoToWire(l))
		if got == nil || !reflect.DeepEqual(got.Seconds, l.Seconds) || got.Window != l.Window ||
			(got.Hold < 0) != (l.Hold < 0) || l.Hold >= 0 && got.Hold != l.Hold {
			t.Errorf("%+v: came back as %+v", l, got)
		}
	}
	if leoToWire(nil) != nil || leoFromWire(nil) != nil {
		t.Error("no schedule did not stay none")
	}
	if l := leoFromWire(&ctrlmsg.LEOSchedule{HoldMs: 5000}); l != nil {
		t.Errorf("a 5-s hold was accepted: %+v", l)
	}
}

// TestLEOScheduleReachesConcentrator checks that the concentrator's path
// gets the schedule of the edge's uplink, so that its downlink holds too.
func TestLEOScheduleReachesConcentrator(t *testing.T) {
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) {
		o.Uplinks[1].LEOReconf = &policy.LEOReconf{Hold: 70 * time.Millisecond}
	})
	tb.waitActive(t, 2)
	var paths []*path
	waitFor(t, func() bool {
		b := tb.conc.Bond("van-1")
		if b == nil {
			return false
		}
		paths = b.paths.Load().paths
		return len(paths) == 2
	})
	for _, p := range paths {
		l := p.state.LEOReconf()
		switch p.name {
		case "up1":
			if l == nil || l.Hold != 70*time.Millisecond {
				t.Errorf("concentrator path %s: LEO schedule %+v, want a 70-ms hold", p.name, l)
			}
		default:
			if l != nil {
				t.Errorf("concentrator path %s: LEO schedule %+v, want none", p.name, l)
			}
		}
	}
}
