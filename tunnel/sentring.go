package tunnel

import (
	"time"

	"github.com/quic-go/quic-go/qlog"
)

// The recorder's ring of sent 1-RTT packets (tracer.go): for each of the
// last pmtuRing packet numbers, the largest DATAGRAM frame the packet
// carried (bytes), whether it was a path MTU probe (pmtu.go), its send
// time, and whether it was since acknowledged or lost. The peer's ACK
// frames (RFC 9000 §19.3) then tell which datagram sizes arrive, for path
// MTU discovery, and which datagrams did not.
//
// Losses quic-go does not report. quic-go reports a lost packet (a
// qlog.PacketLost event) when its loss detection declares it lost (RFC
// 9002 §6.1). But when the probe timeout fires (§6.2) and the connection
// has nothing to retransmit, which is the normal case for DATAGRAM frames
// (RFC 9221 §5.2: they are never retransmitted), quic-go's PTO code
// (sentPacketHandler.QueueProbePacket) takes each outstanding packet out
// of its history and out of the bytes in flight, looking for frames to
// resend, without any event; then it sends a PING, which the peer
// acknowledges. Such packets are then neither acknowledged nor lost as
// far as the events tell. That is what a path MTU black hole does to a
// path that carries large datagrams in bursts (the scheduler stops at the
// congestion window, the PTO clears it, the next burst goes the same
// way): without this inference no large datagram is ever reported lost
// and the black hole goes undetected for seconds.
//
// So the recorder applies RFC 9002 §6.1.2's time threshold itself: when
// an ACK frame arrives, every datagram-carrying packet with a number below
// the largest acknowledged that is neither acknowledged nor reported lost
// and was sent more than lossDelay (max(9/8 × smoothed RTT, 1 ms)) before
// is lost, and handled exactly like a reported loss (path.datagramLost).
// quic-go logs a received packet after handling its frames, so its own
// losses for the same ACK are reported first; each packet is counted at
// most once, whichever says it first.

// pmtuRing is how many sent 1-RTT packets a recorder remembers (a power
// of two).
const pmtuRing = 1024

// Ring slot layout: the packet number above slotPNShift, then flags, then
// the largest datagram's size in the low 15 bits.
const (
	slotSizeMask = 1<<15 - 1
	slotProbe    = 1 << 15 // a path MTU probe of pmtu.go
	slotAcked    = 1 << 16 // acknowledged
	slotLost     = 1 << 17 // lost (reported by quic-go or inferred)
	slotPNShift  = 18
	// slotMaxPN bounds the packet numbers the ring holds.
	slotMaxPN = 1 << (63 - slotPNShift)
)

// minLossDelay is kGranularity (RFC 9002 §6.1.2).
const minLossDelay = time.Millisecond

// lossSink takes the losses the recorder infers (*path; a test's fake).
type lossSink interface {
	// datagramLost handles the loss of a packet whose largest datagram was
	// size bytes (0: unknown), probe if it was a path MTU probe.
	datagramLost(size int, probe bool)
}

// pmtuSlot packs a 1-RTT packet number, a probe flag and the packet's
// largest datagram size (bytes) into one ring entry.
func pmtuSlot(pn int64, probe bool, size int) uint64 {
	v := uint64(pn)<<slotPNShift | uint64(min(size, slotSizeMask))
	if probe {
		v |= slotProbe
	}
	return v
}

// noteSent remembers 1-RTT packet pn, sent at now (unix ns), whose largest
// datagram was size bytes (0: none).
func (r *recorder) noteSent(pn int64, probe bool, size int, now int64) {
	if pn < 0 || pn >= slotMaxPN {
		return
	}
	i := pn & (pmtuRing - 1)
	r.sentAt[i].Store(now)
	r.sizes[i].Store(pmtuSlot(pn, probe, size))
}

// slot returns the ring entry of pn, ok false when it holds another packet.
func (r *recorder) slot(pn int64) (v uint64, ok bool) {
	if pn < 0 || pn >= slotMaxPN {
		return 0, false
	}
	v = r.sizes[pn&(pmtuRing-1)].Load()
	return v, v != 0 && int64(v>>slotPNShift) == pn
}

// sizeOf returns what noteSent remembered of pn.
func (r *recorder) sizeOf(pn int64) (size int, probe, ok bool) {
	v, ok := r.slot(pn)
	if !ok {
		return 0, false, false
	}
	return int(v & slotSizeMask), v&slotProbe != 0, true
}

// settle marks pn with flag (slotAcked or slotLost) unless it was already
// acknowledged or lost; it reports whether this call did, and what
// noteSent remembered of pn.
func (r *recorder) settle(pn int64, flag uint64) (size int, probe, ok bool) {
	s := &r.sizes[pn&(pmtuRing-1)]
	for {
		v := s.Load()
		if v == 0 || int64(v>>slotPNShift) != pn || v&(slotAcked|slotLost) != 0 {
			return 0, false, false
		}
		if s.CompareAndSwap(v, v|flag) {
			return int(v & slotSizeMask), v&slotProbe != 0, true
		}
	}
}

// noteLost records that quic-go declared pn lost. It reports whether the
// loss is news: false when pn was acknowledged or its loss already
// inferred (noteAcks), or pn is not remembered.
func (r *recorder) noteLost(pn int64) (size int, probe, news bool) {
	if pn < 0 || pn >= slotMaxPN {
		return 0, false, false
	}
	return r.settle(pn, slotLost)
}

// noteAcks takes an ACK frame the peer sent at now: it reports each newly
// acknowledged packet's datagram size to pm, and the datagrams that the
// frame shows lost under the time threshold (lossDelay; see the top of
// this file) to sink. Allocation-free.
func (r *recorder) noteAcks(ack *qlog.AckFrame, pm *pathPMTU, now time.Time, lossDelay time.Duration, sink lossSink) {
	if len(ack.AckRanges) == 0 {
		return
	}
	largest := int64(ack.AckRanges[0].Largest)
	if largest < 0 || largest >= slotMaxPN {
		return
	}
	// Packets below floor are settled, or forgotten by the ring.
	floor := max(r.scanFrom.Load(), largest-pmtuRing+1, 0)
	advanced := false
	for _, rg := range ack.AckRanges { // largest first
		lo := max(int64(rg.Smallest), floor)
		for pn := int64(rg.Largest); pn >= lo; pn-- {
			if size, _, ok := r.settle(pn, slotAcked); ok {
				r.held.acked(pn)
				pm.onDelivered(size)
				advanced = true
			}
		}
		if lo > int64(rg.Smallest) {
			break
		}
	}
	if advanced && pm.bigSince.Load() != 0 {
		pm.bigSince.Store(0) // the peer's ACKs advanced
	}
	if largest < r.largestAcked.Load() {
		return // an older ACK frame: nothing new below it
	}
	r.largestAcked.Store(largest)
	cut := now.UnixNano() - int64(max(lossDelay, minLossDelay))
	pn := floor
	for ; pn < largest; pn++ {
		v, ok := r.slot(pn)
		if !ok || v&(slotAcked|slotLost) != 0 || v&slotSizeMask == 0 {
			continue // another packet's slot, settled, or no datagram in it
		}
		if r.sentAt[pn&(pmtuRing-1)].Load() > cut {
			break // sent too recently to call lost (and so is every later one)
		}
		if size, probe, ok := r.settle(pn, slotLost); ok {
			if pc := r.pc.Load(); pc != nil {
				r.held.lost(pn, pc.path, now)
			}
			sink.datagramLost(size, probe)
		}
	}
	r.scanFrom.Store(pn)
}

// lossDelay is RFC 9002 §6.1.2's time threshold for a path whose smoothed
// RTT is srtt: 9/8 × srtt, at least minLossDelay.
func lossDelay(srtt time.Duration) time.Duration {
	return max(srtt*9/8, minLossDelay)
}
