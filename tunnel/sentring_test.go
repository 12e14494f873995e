package tunnel

import (
	"slices"
	"testing"
	"time"
)

// fakeLossSink records the losses a recorder finds.
type fakeLossSink struct {
	sizes  []int
	probes int
}

func (f *fakeLossSink) datagramLost(size int, probe bool) {
	f.sizes = append(f.sizes, size)
	if probe {
		f.probes++
	}
}

// TestRecorderAbandoned replays what quic-go's probe timeout does to a
// burst of datagrams sent into a hole (sentring.go): the controller hook
// reports each packet it takes out of flight as abandoned. Every abandoned
// datagram packet is lost once, never a packet without a datagram, never
// one acknowledged or already reported by quic-go's loss detection; a
// later loss event for it is no news.
func TestRecorderAbandoned(t *testing.T) {
	type send struct {
		pn    int64
		size  int // 0: no datagram (a PING, an ACK-only packet)
		probe bool
	}
	burst := func(from, to int64, size int) []send {
		var s []send
		for pn := from; pn <= to; pn++ {
			s = append(s, send{pn: pn, size: size})
		}
		return s
	}
	for _, c := range []struct {
		name      string
		sends     []send
		acked     []int64
		quicLost  []int64
		abandoned []int64
		wantLost  []int // sizes found lost, in order
		wantProbe int
		laterLost []int64 // quic-go's losses after, none news
	}{
		{name: "PTO after a burst into a hole", sends: append(burst(0, 4, 1322), send{pn: 5}),
			abandoned: []int64{0, 1, 2, 3, 4, 5}, wantLost: []int{1322, 1322, 1322, 1322, 1322}, laterLost: []int64{0, 4}},
		{name: "a probe among them", sends: []send{{pn: 0, size: 1200}, {pn: 1, size: 1322, probe: true}, {pn: 2, size: 300}},
			acked: []int64{0}, abandoned: []int64{0, 1, 2}, wantLost: []int{1322, 300}, wantProbe: 1},
		{name: "packets without a datagram are never lost", sends: []send{{pn: 0}, {pn: 1}}, abandoned: []int64{0, 1}},
		{name: "quic-go's own loss first: counted once", sends: burst(0, 3, 1322), quicLost: []int64{1},
			abandoned: []int64{1, 2}, wantLost: []int{1322}},
		{name: "a packet the ring forgot", sends: burst(0, 1, 1322), abandoned: []int64{pmtuRing}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			var pm pathPMTU
			pm.init(testMTU+HeaderBudget, PathOptions{}, time.Now())
			for _, x := range c.sends {
				r.noteSent(x.pn, x.probe, x.size)
			}
			for _, pn := range c.acked {
				r.onAcked(pn, &pm)
			}
			for _, pn := range c.quicLost {
				if _, _, news := r.noteLost(pn); !news {
					t.Errorf("quic-go's loss of %d is no news", pn)
				}
			}
			var sink fakeLossSink
			for _, pn := range c.abandoned {
				r.onAbandoned(pn, time.Now(), &sink)
			}
			if !slices.Equal(sink.sizes, c.wantLost) || sink.probes != c.wantProbe {
				t.Errorf("lost %v (%d probes), want %v (%d)", sink.sizes, sink.probes, c.wantLost, c.wantProbe)
			}
			for _, pn := range c.laterLost {
				if _, _, news := r.noteLost(pn); news {
					t.Errorf("quic-go's loss of %d is news after it was abandoned", pn)
				}
			}
		})
	}
}

// TestRecorderSlots checks the 32-bit ring slots: a packet's size and
// probe flag come back for its own number only, not for the packets that
// share its slot (1,024 numbers apart) up to 16,384 numbers on, large
// numbers included; a settled packet settles once.
func TestRecorderSlots(t *testing.T) {
	cases := []struct {
		name      string
		sent      int64 // the packet noted
		size      int
		probe     bool
		ask       int64 // the packet looked up
		wantOK    bool
		wantSize  int
		wantProbe bool
	}{
		{"own", 7, 1200, false, 7, true, 1200, false},
		{"probe", 8, 1452, true, 8, true, 1452, true},
		{"next in the slot", 9 + pmtuRing, 1200, false, 9, false, 0, false},
		{"15 slots on", 10 + 15*pmtuRing, 1200, false, 10, false, 0, false},
		{"large number", 1<<40 + 11, 1300, false, 1<<40 + 11, true, 1300, false},
		{"size clamped", 12, 70000, false, 12, true, slotSizeMask, false},
		{"negative", -1, 1200, false, -1, false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r recorder
			r.noteSent(c.sent, c.probe, c.size)
			size, probe, ok := r.sizeOf(c.ask)
			if ok != c.wantOK || size != c.wantSize || probe != c.wantProbe {
				t.Fatalf("sizeOf(%d) = %d %v %v, want %d %v %v", c.ask, size, probe, ok, c.wantSize, c.wantProbe, c.wantOK)
			}
			if !c.wantOK {
				return
			}
			if _, _, ok := r.settle(c.ask, slotAcked); !ok {
				t.Fatal("first settle refused")
			}
			if _, _, ok := r.settle(c.ask, slotLost); ok {
				t.Fatal("second settle accepted")
			}
		})
	}
}
