package tunnel

import (
	"math"
	"testing"
	"time"

	"github.com/bondd/bondd/policy"
)

// fakeDef stands for quic-go's own controller: a fixed window, and counts
// of the events it hears.
type fakeDef struct {
	window                   int64
	sent, acked, lost, paced int
}

func (f *fakeDef) OnPacketSent(time.Time, int64, int64, int64, bool) { f.sent++ }
func (f *fakeDef) OnPacketAcked(int64, int64, int64, time.Time)      { f.acked++ }
func (f *fakeDef) OnPacketLost(int64, int64, int64)                  { f.lost++ }
func (f *fakeDef) OnPacketAbandoned(int64, int64)                    {}
func (f *fakeDef) OnSpuriousLoss(int64)                              {}
func (f *fakeDef) OnRetransmissionTimeout(bool)                      {}
func (f *fakeDef) MaybeExitSlowStart()                               {}
func (f *fakeDef) CanSend(inFlight int64) bool                       { return inFlight < f.window }
func (f *fakeDef) HasPacingBudget(time.Time) bool                    { f.paced++; return true }
func (f *fakeDef) TimeUntilSend(int64) time.Time                     { return time.Time{} }
func (f *fakeDef) SetMaxDatagramSize(int64)                          {}
func (f *fakeDef) CongestionWindow() int64                           { return f.window }
func (f *fakeDef) InSlowStart() bool                                 { return true }
func (f *fakeDef) InRecovery() bool                                  { return false }

// fakeRTT is a connection's RTT estimate.
type fakeRTT struct{ min time.Duration }

func (r fakeRTT) MinRTT() time.Duration        { return r.min }
func (r fakeRTT) SmoothedRTT() time.Duration   { return r.min }
func (r fakeRTT) LatestRTT() time.Duration     { return r.min }
func (r fakeRTT) MeanDeviation() time.Duration { return 0 }

// newTestCC returns a path's controller with quic-go's def behind it; on
// makes the path rate-controlled at target bytes/s.
func newTestCC(on bool, target float64, minRTT time.Duration, leo bool) (*pathCC, *fakeDef, *path) {
	rec, state, pc := newTestRecorder("p")
	if leo {
		state.SetLEOReconf(&policy.LEOReconf{})
	}
	p := pc.path
	if on {
		p.rc.on = true
		p.rc.peer.Store(true)
	}
	p.rc.target.Store(math.Float64bits(target))
	def := &fakeDef{window: 50_000}
	return &pathCC{rec: rec, def: def, rtt: fakeRTT{minRTT}, maxSize: 1252}, def, p
}

// TestPathCCWindow: under bondd's rate control the window is target × (2 ×
// min RTT + 55 ms) (plus the LEO hold at the target, at least 4 packets) and loss
// does not touch it; otherwise quic-go's own controller decides.
func TestPathCCWindow(t *testing.T) {
	for _, c := range []struct {
		name   string
		on     bool
		target float64 // bytes/s
		minRTT time.Duration
		leo    bool
		want   int64 // bytes
	}{
		{"quic-go's own", false, 1.25e6, 40 * time.Millisecond, false, 50_000},
		{"10 Mbit/s at 40 ms", true, 1.25e6, 40 * time.Millisecond, false, 100_000 + 68_750},
		{"with the LEO hold", true, 1.25e6, 40 * time.Millisecond, true, 100_000 + 68_750 + 137_500},
		{"no RTT sample yet: 100 ms", true, 1.25e6, 0, false, 250_000 + 68_750},
		{"at least 4 packets", true, 1_000, 10 * time.Millisecond, false, 4 * 1252},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc, def, _ := newTestCC(c.on, c.target, c.minRTT, c.leo)
			if !cc.CanSend(c.want-1) || cc.CanSend(c.want) {
				t.Errorf("window: CanSend(%d) %v, CanSend(%d) %v; want a window of %d", c.want-1, cc.CanSend(c.want-1), c.want, cc.CanSend(c.want), c.want)
			}
			if got := cc.CongestionWindow(); got != c.want {
				t.Errorf("CongestionWindow %d, want %d", got, c.want)
			}
			cc.OnPacketLost(1, 1252, c.want)
			if def.lost != 1 {
				t.Errorf("quic-go's controller heard %d losses, want 1", def.lost)
			}
			if !cc.CanSend(c.want-1) && c.on {
				t.Error("a loss shrank bondd's window")
			}
		})
	}
}

// TestPathCCPacing: under bondd's rate control packets leave at 1.1 × the
// target after a burst of ten packets.
func TestPathCCPacing(t *testing.T) {
	const target = 1.25e6 // bytes/s
	cc, def, _ := newTestCC(true, target, 40*time.Millisecond, false)
	now := time.Unix(1000, 0)
	sent := 0
	for cc.HasPacingBudget(now) {
		cc.OnPacketSent(now, 0, int64(sent), 1252, true)
		sent++
	}
	if sent < 10 || sent > 12 {
		t.Errorf("a burst of %d packets, want 10", sent)
	}
	// A second at the pace: the packets that leave.
	end := now.Add(time.Second)
	n := 0
	for now.Before(end) {
		if cc.HasPacingBudget(now) {
			cc.OnPacketSent(now, 0, int64(sent+n), 1252, true)
			n++
			continue
		}
		now = now.Add(100 * time.Microsecond)
	}
	want := ccPacingGain * target / 1252
	if float64(n) < 0.97*want || float64(n) > 1.03*want {
		t.Errorf("%d packets in a second, want %.0f", n, want)
	}
	if def.paced != 0 {
		t.Errorf("quic-go's pacer was asked %d times on a path that is not application-limited", def.paced)
	}
	if def.sent != sent+n {
		t.Errorf("quic-go's controller heard %d packets sent, want all %d", def.sent, sent+n)
	}
}

// TestPathCCAckOnly: packets of ACK frames only, which the receiving end
// of a bulk path sends thousands of a second, leave the pacer's budget to
// the ack-eliciting packets (its control stream's rate reports).
func TestPathCCAckOnly(t *testing.T) {
	const target = 125_000 // bytes/s: the initial rate of a direction that sends nothing
	cc, def, _ := newTestCC(true, target, 20*time.Millisecond, false)
	now := time.Unix(1000, 0)
	for i := range 2000 { // 100 kB of ACKs in 10 ms: 80 Mbit/s
		now = now.Add(5 * time.Microsecond)
		cc.OnPacketSent(now, 0, int64(i), 50, false)
	}
	if !cc.HasPacingBudget(now) {
		t.Fatalf("ACK-only packets at 80 Mbit/s used up the pacing budget of a %d-byte/s path", target)
	}
	sent := 0
	for cc.HasPacingBudget(now) {
		cc.OnPacketSent(now, 0, int64(2000+sent), 1252, true)
		sent++
	}
	if sent < 10 {
		t.Errorf("a burst of %d ack-eliciting packets after the ACKs, want 10", sent)
	}
	if def.sent != 2000+sent {
		t.Errorf("quic-go's controller heard %d packets sent, want all %d", def.sent, 2000+sent)
	}
}

// TestPathCCAbandoned: a datagram packet the probe timeout abandoned is
// lost on the path once, whatever the rate control.
func TestPathCCAbandoned(t *testing.T) {
	for _, on := range []bool{false, true} {
		cc, _, p := newTestCC(on, 1.25e6, 40*time.Millisecond, false)
		cc.rec.noteSent(7, false, 1200)
		cc.rec.noteSent(8, false, 1200)
		cc.OnPacketAcked(8, 1250, 2500, time.Now())
		cc.OnPacketAbandoned(7, 1250)
		cc.OnPacketAbandoned(7, 1250)
		cc.OnPacketAbandoned(8, 1250)
		if got := p.state.PacketsLost(); got != 1 {
			t.Errorf("rate control %v: %d packets lost, want 1", on, got)
		}
	}
}

// TestPathCCMetrics: the path's view of the connection (pathConn.onMetrics)
// follows every packet: the bytes in flight quic-go reports with a packet
// sent, less each packet acknowledged, lost or abandoned since (an ECN
// congestion report, with no packet, takes nothing); the RTT is 0 before
// the first sample.
func TestPathCCMetrics(t *testing.T) {
	cc, _, p := newTestCC(true, 1.25e6, 20*time.Millisecond, false)
	now := time.Now()
	steps := []struct {
		name string
		do   func()
		want int64
	}{
		{"sent", func() { cc.OnPacketSent(now, 3000, 1, 1000, true) }, 3000},
		{"acked", func() { cc.OnPacketAcked(1, 1000, 3000, now) }, 2000},
		{"lost", func() { cc.OnPacketLost(2, 1000, 2000) }, 1000},
		{"ECN congestion", func() { cc.OnPacketLost(2, 0, 1000) }, 1000},
		{"abandoned", func() { cc.OnPacketAbandoned(3, 1000) }, 0},
		{"sent again", func() { cc.OnPacketSent(now, 1200, 4, 1200, true) }, 1200},
	}
	for _, s := range steps {
		s.do()
		if got := p.pc.inflight.Load(); got != s.want {
			t.Errorf("after %s: %d bytes in flight, want %d", s.name, got, s.want)
		}
	}
	if srtt := p.pc.srtt.Load(); srtt != int64(20*time.Millisecond) {
		t.Errorf("srtt %v, want the connection's 20ms", time.Duration(srtt))
	}
	cc.rtt = fakeRTT{0}
	cc.OnPacketAcked(4, 1200, 1200, now)
	if srtt := p.pc.srtt.Load(); srtt != 0 {
		t.Errorf("srtt %v before the first RTT sample, want 0", time.Duration(srtt))
	}
}

// BenchmarkPathCC is the controller's cost per packet under bondd's rate
// control: the window and pacer asked, the packet's DATAGRAM frame and the
// packet sent (with the recorder's part, tracer.go), acknowledged, and a
// packet received.
func BenchmarkPathCC(b *testing.B) {
	cc, _, _ := newTestCC(true, 1.25e8, 20*time.Millisecond, false)
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		pn := int64(i)
		now = now.Add(10 * time.Microsecond)
		cc.CanSend(100_000)
		cc.HasPacingBudget(now)
		cc.OnDatagramSent(pn, 1200)
		cc.OnPacketSent(now, 100_000, pn, 1252, true)
		cc.OnPacketAcked(pn, 1252, 100_000, now)
		cc.OnPacketReceived()
	}
}

// TestPathCCAllocs: the controller's per-packet path does not allocate.
func TestPathCCAllocs(t *testing.T) {
	cc, _, _ := newTestCC(true, 1.25e8, 20*time.Millisecond, false)
	now, pn := time.Now(), int64(0)
	if a := testing.AllocsPerRun(1000, func() {
		now = now.Add(10 * time.Microsecond)
		cc.CanSend(100_000)
		cc.HasPacingBudget(now)
		cc.TimeUntilSend(100_000)
		cc.OnDatagramSent(pn, 1200)
		cc.OnPacketSent(now, 100_000, pn, 1252, true)
		cc.OnPacketAcked(pn, 1252, 100_000, now)
		cc.OnPacketReceived()
		pn++
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}
