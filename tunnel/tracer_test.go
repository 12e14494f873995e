package tunnel

import (
	"testing"
	"time"
)

// TestRecorderSent replays what the controller hook reports of packets
// sent (tracer.go): each DATAGRAM frame, then its packet. The ring holds
// the packet's largest datagram, a datagram of the probe's size marks the
// packet as the path MTU probe, the send queue's count drops by the frames
// packed, and frames reported for a packet that never reached sent are
// not charged to the next.
func TestRecorderSent(t *testing.T) {
	type pkt struct {
		pn        int64
		frames    []int // DATAGRAM payloads reported before the packet
		eliciting bool
		skipSent  bool // the frames are reported, the packet is not
	}
	for _, c := range []struct {
		name      string
		probeSize int64
		pkts      []pkt
		wantPN    int64 // the packet whose ring entry is checked
		wantSize  int
		wantProbe bool
		wantLeft  int64 // datagrams packed (pathConn.unsent's drop)
		wantSent  uint64
	}{
		{name: "two frames, the larger counts", pkts: []pkt{{pn: 5, frames: []int{300, 1200}, eliciting: true}},
			wantPN: 5, wantSize: 1200, wantLeft: 2, wantSent: 1},
		{name: "ACK-only packet", pkts: []pkt{{pn: 3}}, wantPN: 3, wantSent: 1},
		{name: "frames of a packet never sent", pkts: []pkt{{pn: 4, frames: []int{900}, skipSent: true}, {pn: 5, eliciting: true}},
			wantPN: 5, wantSent: 1},
		{name: "frames of a packet never sent, then the next's", pkts: []pkt{{pn: 4, frames: []int{900}, skipSent: true}, {pn: 5, frames: []int{300}, eliciting: true}},
			wantPN: 5, wantSize: 300, wantLeft: 1, wantSent: 1},
		{name: "the probe", probeSize: 1300, pkts: []pkt{{pn: 9, frames: []int{1300}, eliciting: true}},
			wantPN: 9, wantSize: 1300, wantProbe: true, wantLeft: 1, wantSent: 1},
		{name: "not the probe's size", probeSize: 1300, pkts: []pkt{{pn: 9, frames: []int{1200}, eliciting: true}},
			wantPN: 9, wantSize: 1200, wantLeft: 1, wantSent: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, state, pc := newTestRecorder("a")
			pc.probeSize.Store(c.probeSize)
			for _, p := range c.pkts {
				for _, n := range p.frames {
					rec.datagramSent(p.pn, n)
				}
				if !p.skipSent {
					rec.sent(p.pn, p.eliciting)
				}
			}
			size, probe, ok := rec.sizeOf(c.wantPN)
			if !ok || size != c.wantSize || probe != c.wantProbe {
				t.Errorf("ring entry of %d: size %d, probe %v, known %v; want %d, %v, true", c.wantPN, size, probe, ok, c.wantSize, c.wantProbe)
			}
			if left := -pc.unsent.Load(); left != c.wantLeft {
				t.Errorf("%d datagrams left quic-go's queue, want %d", left, c.wantLeft)
			}
			if got := state.PacketsSent(); got != c.wantSent {
				t.Errorf("%d packets sent, want %d", got, c.wantSent)
			}
			if c.wantProbe && pc.probeSize.Load() != 0 {
				t.Error("the probe's size is still armed after it was sent")
			}
		})
	}
}

// TestRecorderDropped: a frame the full receive queue dropped counts on the
// path, or before the path is known, once it is attached; one to send that
// no packet could fit leaves the send queue's count and counts as too
// large.
func TestRecorderDropped(t *testing.T) {
	rec, _, pc := newTestRecorder("a")
	rec.datagramDropped(true, 100)
	rec.datagramDropped(false, 1400)
	if got := pc.path.drops.get(DropReceiveQueueFull); got != 1 {
		t.Errorf("receive_queue_full %d, want 1", got)
	}
	if got := pc.path.drops.get(DropTooLarge); got != 1 || pc.unsent.Load() != -1 {
		t.Errorf("too_large %d, unsent %d; want 1 and -1", got, pc.unsent.Load())
	}

	early := &recorder{}
	early.datagramDropped(true, 100)
	early.datagramDropped(true, 100)
	early.attach(pc)
	if got := pc.path.drops.get(DropReceiveQueueFull); got != 3 {
		t.Errorf("receive_queue_full %d after attaching a recorder that saw 2 before, want 3", got)
	}
}

// TestRecorderReceived: a packet received before the path is known marks
// the dial answered (Edge.dial); after, it is the peer heard (liveness).
func TestRecorderReceived(t *testing.T) {
	early := &recorder{}
	early.received(time.Now())
	if !early.answered.Load() {
		t.Error("a packet before the path is known did not mark the dial answered")
	}
	rec, state, _ := newTestRecorder("a")
	at := time.Now()
	rec.received(at)
	if s := state.Silence(at); s != 0 {
		t.Errorf("the peer silent for %v after a packet received, want 0", s)
	}
}
