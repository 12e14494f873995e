package tunnel

import "time"

// The recorder's ring of sent packets (tracer.go): for each of the
// last pmtuRing packet numbers, the largest DATAGRAM frame the packet
// carried (bytes), whether it was a path MTU probe (pmtu.go), and whether
// it was since acknowledged or lost. quic-go's loss detection tells the
// path's controller (cc.go) of each packet acknowledged, which tells which
// datagram sizes arrive, for path MTU discovery, and which datagrams were
// delivered, for resends (resend.go).
//
// Losses quic-go does not report as such. quic-go reports a lost packet
// to the controller (OnPacketLost) when its loss detection declares it
// lost (RFC 9002 §6.1). But when the probe timeout fires (§6.2) it takes the oldest
// outstanding packet out of flight to resend its frames without declaring
// it lost, and a packet of DATAGRAM frames (RFC 9221 §5.2: never
// retransmitted) is then gone with no event. That is what a path MTU black
// hole does to a path that carries large datagrams in bursts; unnoticed,
// no large datagram is ever reported lost and the black hole goes
// undetected for seconds. The quic-go fork's controller hook reports such
// packets (congestion.Controller.OnPacketAbandoned), and the path's
// controller (cc.go) hands them to abandoned, which handles them exactly
// like a reported loss. Each packet is counted at most once, whichever
// says it first.

// pmtuRing is how many sent packets a recorder remembers (a power
// of two).
const pmtuRing = 1024

// Ring slot layout, 32 bits (4 KiB a connection, on every connection of
// every bond, idle ones too): the low 14 bits of the packet number above
// slotPNShift, then flags, then the largest datagram's size in the low 15
// bits. The slot of pn (pn mod pmtuRing) holds the newest packet sent
// with that index; its 14 bits tell pn from the packets 1024 to 15,360
// numbers after it, so a packet is taken for another only when more than
// 16,384 packets (20 MiB at 1,300 bytes) are in flight.
const (
	slotSizeMask = 1<<15 - 1
	slotProbe    = 1 << 15 // a path MTU probe of pmtu.go
	slotAcked    = 1 << 16 // acknowledged
	slotLost     = 1 << 17 // lost (reported by quic-go or inferred)
	slotPNShift  = 18
	slotPNMask   = 1<<(32-slotPNShift) - 1
	// slotMaxPN bounds the packet numbers the ring holds (quic-go's are
	// below 2^62).
	slotMaxPN = 1 << 62
)

// slotPN returns the part of packet number pn a slot keeps.
func slotPN(pn int64) uint32 { return uint32(pn&slotPNMask) << slotPNShift }

// slotHolds reports whether slot v holds packet number pn.
func slotHolds(v uint32, pn int64) bool {
	return v != 0 && v>>slotPNShift == uint32(pn&slotPNMask)
}

// pmtuSlot packs a packet number, a probe flag and the packet's
// largest datagram size (bytes) into one ring entry.
func pmtuSlot(pn int64, probe bool, size int) uint32 {
	v := slotPN(pn) | uint32(min(size, slotSizeMask))
	if probe {
		v |= slotProbe
	}
	return v
}

// noteSent remembers packet pn, whose largest datagram was size bytes
// (0: none).
func (r *recorder) noteSent(pn int64, probe bool, size int) {
	if pn < 0 || pn >= slotMaxPN {
		return
	}
	r.sizes[pn&(pmtuRing-1)].Store(pmtuSlot(pn, probe, size))
}

// slot returns the ring entry of pn, ok false when it holds another packet.
func (r *recorder) slot(pn int64) (v uint32, ok bool) {
	if pn < 0 || pn >= slotMaxPN {
		return 0, false
	}
	v = r.sizes[pn&(pmtuRing-1)].Load()
	return v, slotHolds(v, pn)
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
func (r *recorder) settle(pn int64, flag uint32) (size int, probe, ok bool) {
	s := &r.sizes[pn&(pmtuRing-1)]
	for {
		v := s.Load()
		if !slotHolds(v, pn) || v&(slotAcked|slotLost) != 0 {
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

// lossSink takes the losses the recorder finds (*path; a test's fake).
type lossSink interface {
	// datagramLost handles the loss of a packet whose largest datagram was
	// size bytes (0: unknown), probe if it was a path MTU probe.
	datagramLost(size int, probe bool)
}

// acked handles packet pn, newly acknowledged (cc.go: quic-go's
// loss detection calls the controller once per packet, RFC 9002 §6).
func (r *recorder) acked(pn int64) {
	if pc := r.pc.Load(); pc != nil {
		r.onAcked(pn, &pc.path.pmtu)
	}
}

// onAcked settles pn as acknowledged: its datagrams are delivered
// (resend.go) and their size reaches the path's MTU search pm (pmtu.go).
// Allocation-free.
func (r *recorder) onAcked(pn int64, pm *pathPMTU) {
	size, _, ok := r.settle(pn, slotAcked)
	if !ok {
		return
	}
	r.held.acked(pn)
	pm.onDelivered(size)
	if pm.bigSince.Load() != 0 {
		pm.bigSince.Store(0) // the peer's ACKs advanced
	}
}

// abandoned handles packet pn, which quic-go's probe timeout took
// out of flight at now without declaring it lost (cc.go).
func (r *recorder) abandoned(pn int64, now time.Time) {
	if pc := r.pc.Load(); pc != nil {
		r.onAbandoned(pn, now, pc.path)
	}
}

// onAbandoned settles pn as lost if it carried datagrams and is neither
// acknowledged nor lost yet: its datagrams may be resent (resend.go), and
// sink hears of the loss as of one quic-go reported. Allocation-free.
func (r *recorder) onAbandoned(pn int64, now time.Time, sink lossSink) {
	size, probe, ok := r.settle(pn, slotLost)
	if !ok || size == 0 {
		return
	}
	if pc := r.pc.Load(); pc != nil {
		r.held.lost(pn, pc.path, now)
	}
	sink.datagramLost(size, probe)
}
