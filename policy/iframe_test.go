package policy

import (
	"testing"
	"time"
)

func TestSlack(t *testing.T) {
	tests := []struct{ s, cwnd, want int64 }{
		{230_000, 80_000, 10_000}, // MoMQ §4.1's example: k = 3 rounds, B = 10 KB
		{160_000, 80_000, 0},
		{1, 80_000, 79_999},
		{230_000, 0, 0}, // no window: a zero budget admits nothing
		{0, 80_000, 0},
	}
	for _, tt := range tests {
		if got := slack(tt.s, tt.cwnd); got != tt.want {
			t.Errorf("slack(%d, %d) = %d, want %d", tt.s, tt.cwnd, got, tt.want)
		}
	}
}

func TestIFrameTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	ms := time.Millisecond
	sat, ter := NewPath("sat", nil, 256), NewPath("ter", nil, 256)
	paths := []*Path{sat, ter}
	for _, p := range paths {
		p.SetConnected(true, now)
		p.OnMetrics(50*ms, 40*ms, 80_000, 0)
	}
	if PendingIFrame(paths, now, 1200) {
		t.Fatal("pending before any I-frame")
	}
	// A 230 KB I-frame, 1150-byte packets, on sat: k = 3 rounds, B = 10 KB.
	for range 200 {
		sat.OnIFramePacket(7, 1150, now)
	}
	if b, used := sat.IFrameSlack(now); b != 10_000 || used != 0 {
		t.Fatalf("slack %d (used %d), want 10000 (MoMQ eq. 1)", b, used)
	}
	if !PendingIFrame(paths, now, 1200) || ter.IFramePending(now) {
		t.Fatal("I-frame not pending on sat only")
	}
	// P-frame packets fill the slack and no more.
	admitted := 0
	for range 20 {
		if sat.AdmitPFrame(1200, now) {
			admitted += 1200
		}
	}
	if admitted != 9600 {
		t.Fatalf("admitted %d P-frame bytes, want 9600 (8 packets within B = 10000)", admitted)
	}
	if PendingIFrame(paths, now, 1200) || !PendingIFrame(paths, now, 400) {
		t.Fatal("annotation should hold only for packets that still fit the slack")
	}
	if ter.AdmitPFrame(100, now) {
		t.Fatal("admitted on a path without an I-frame")
	}
	// In flight for k = 3 smoothed RTTs after the last packet (queue empty).
	if !sat.IFramePending(now.Add(149*ms)) || sat.IFramePending(now.Add(150*ms)) {
		t.Fatal("I-frame should be pending for 3 × 50 ms")
	}
	// A queue ahead of the I-frame keeps it pending while it drains.
	ter.SetQueueLen(100, 160_000) // two windows: 2 sRTTs to drain
	ter.OnIFramePacket(8, 1000, now)
	if !ter.IFramePending(now.Add(149*ms)) || ter.IFramePending(now.Add(150*ms)) {
		t.Fatal("I-frame behind a 2-window queue should be pending for 2 + 1 sRTTs")
	}
	// A new frame id starts over.
	sat.OnIFramePacket(9, 1000, now.Add(10*ms))
	if b, used := sat.IFrameSlack(now.Add(10 * ms)); b != 79_000 || used != 0 {
		t.Fatalf("new I-frame: slack %d used %d, want 79000 and 0", b, used)
	}
	if a := testing.AllocsPerRun(100, func() {
		sat.OnIFramePacket(9, 1000, now)
		sat.AdmitPFrame(10, now)
		PendingIFrame(paths, now, 1200)
	}); a != 0 {
		t.Fatalf("tracker allocates %v times", a)
	}
}
