package tunnel

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/tun"
)

// The receive path, network → TUN. One goroutine per live path connection,
// the one that serves it (path.serve), runs pathConn.routineReceive:
//
//  1. conn.ReceiveDatagram returns a datagram in a slice quic-go allocated
//     for it; bondd makes no further copy.
//  2. ParseHeader checks the bondd header; a bad one is counted and dropped.
//     Every drop on the way is counted once, by reason (drops.go).
//  3. The bond's sliding window drops duplicates (DUPLICATE action, redundant
//     scheduler, or a peer's retransmission) by sequence number.
//  4. A packet of an FEC block goes to the bond's fec.Decoder: data is
//     delivered at once, and once any k of a block's k + r packets are in,
//     the missing data packets are reconstructed and delivered too.
//  5. A DATA payload with a flow tag (FlagFlow, or a reconstruction that
//     starts with one) goes through the bond's resequencer (reseq.go),
//     which writes it now or holds it until its flow's gap fills or its
//     wait passes, and writes what it releases in flow order.
//  6. The inner packet must be a well-formed IPv4/IPv6 packet and, on the
//     concentrator, come from one of the edge's allowed prefixes.
//  7. The packet is written to the TUN in place: the datagram is resliced so
//     the inner packet starts at tun.MinWriteOffset, and the virtio-net
//     header overwrites the already-parsed bondd header bytes.

// routineReceive delivers the datagrams of conn, the path's connection,
// until conn ends.
func (pc *pathConn) routineReceive(conn *quic.Conn) {
	p := pc.path
	ctx := conn.Context()
	wbuf := make([][]byte, 1)
	rec := newRecovered(p.bond.mtu)
	for {
		dg, err := conn.ReceiveDatagram(ctx)
		if err != nil {
			return // the connection ended
		}
		if isProbe(dg) {
			if p.bond.sendsKeepalives {
				// On the edge, the concentrator's probe means it woke or
				// misses an answer: wake too, and keep the paths alive
				// at the fast keepalive it then expects (idle.go).
				p.bond.touch(time.Now())
			}
			continue // a liveness probe (liveness.go): its ACK is all the peer wants
		}
		p.rxPackets.Add(1)
		p.rxBytes.Add(uint64(len(dg)))
		now := time.Now()
		p.bond.touch(now)        // data: wakes an idle bond (idle.go)
		p.rc.onDatagram(dg, now) // the path's rate meter (ratectl.go)
		if ts, ok := peekTimestamp(dg); ok && pc.fresh.stale(int64(ts), monoclock.Micros(now), p.bond.popts.StaleAfter) {
			p.drops.add(DropStale)
			continue
		}
		p.bond.receive(dg, wbuf, rec)
	}
}

// receive checks one datagram and writes its inner packet, and any packets
// FEC reconstructs with it, to the TUN. wbuf and rec are the calling
// routine's scratch: a one-entry slice for the TUN write and the buffers
// for reconstructed packets.
func (b *Bond) receive(dg []byte, wbuf [][]byte, rec *fec.Recovered) {
	var h Header
	n, err := ParseHeader(dg, &h)
	if err != nil {
		b.drops.add(DropBadHeader)
		return
	}
	b.rx.Lock()
	verdict := b.rx.dedupe.check(h.Seq)
	b.rx.Unlock()
	switch verdict {
	case seqDuplicate:
		b.drops.add(DropDuplicate)
		return
	case seqTooOld:
		b.drops.add(DropTooOld)
		return
	}
	now := time.Now()
	if h.Flags&FlagFEC == 0 {
		b.deliverData(now, &h, dg, n, wbuf)
		return
	}
	if h.Type == TypeData {
		switch v := b.dec.AddData(now, fecRef(&h), dg[n:], rec); {
		case v.Deliver():
			b.deliverData(now, &h, dg, n, wbuf)
		case v == fec.Duplicate: // its reconstruction was delivered already
			b.drops.add(DropDuplicate)
		default:
			b.drops.add(DropBadFEC)
		}
	} else if b.dec.AddParity(now, fecRef(&h), dg[n:], rec) == fec.Bad {
		b.drops.add(DropBadFEC) // a duplicate or untracked parity shard is the decoder's to count
	}
	for i := range rec.Sizes {
		pkt := rec.Bufs[i][:rec.Offset+rec.Sizes[i]]
		if IsFlowTagged(pkt[rec.Offset:]) { // a reconstruction has no header, its tag tells
			if !b.reseq.deliver(now, pkt, rec.Offset, b.reseqWrite) {
				b.drops.add(DropBadFlowTag)
			}
			continue
		}
		b.deliver(pkt, rec.Offset, wbuf)
	}
}

// deliverData delivers the DATA payload dg[n:] whose header is h: through
// the resequencer when it carries a flow tag (FlagFlow), else at once.
func (b *Bond) deliverData(now time.Time, h *Header, dg []byte, n int, wbuf [][]byte) {
	if h.Flags&FlagFlow == 0 {
		b.deliver(dg, n, wbuf)
		return
	}
	if !b.reseq.deliver(now, dg, n, b.reseqWrite) {
		b.drops.add(DropBadFlowTag)
	}
}

// deliver checks the inner packet pkt[n:] and writes it to the TUN; pkt[:n]
// is headroom it may overwrite.
func (b *Bond) deliver(pkt []byte, n int, wbuf [][]byte) {
	src, ok := innerSource(pkt[n:])
	if !ok {
		b.drops.add(DropMalformed)
		return
	}
	if b.allowed != nil && !containsAddr(b.allowed, src) {
		b.drops.add(DropSpoofed)
		return
	}
	b.writeTUN(pkt, n, wbuf)
}

// writeTUN writes the inner packet dg[n:] to the TUN, reusing the header
// bytes in front of it as the write headroom when there are enough.
func (b *Bond) writeTUN(dg []byte, n int, wbuf [][]byte) {
	if n >= tun.MinWriteOffset {
		wbuf[0] = dg[n-tun.MinWriteOffset:]
	} else {
		buf := getBuf()
		defer putBuf(buf)
		l := copy(buf[tun.MinWriteOffset:], dg[n:])
		wbuf[0] = buf[:tun.MinWriteOffset+l]
	}
	if _, err := b.dev.Write(wbuf, tun.MinWriteOffset); err != nil {
		b.drops.add(DropTUNWrite)
		return
	}
	b.ctr.rxPackets.Add(1)
}

// innerSource returns the source address of an IPv4 or IPv6 packet whose
// header fits and whose length field matches len(pkt).
func innerSource(pkt []byte) (netip.Addr, bool) {
	if len(pkt) == 0 {
		return netip.Addr{}, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 || int(pkt[0]&0x0f)*4 < 20 || int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte(pkt[12:16])), true
	case 6:
		if len(pkt) < 40 || int(binary.BigEndian.Uint16(pkt[4:]))+40 != len(pkt) {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(pkt[8:24])), true
	}
	return netip.Addr{}, false
}

// innerDest returns the destination address of an IPv4 or IPv6 packet.
func innerDest(pkt []byte) (netip.Addr, bool) {
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(pkt[16:20])), true
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(pkt[24:40])), true
	}
	return netip.Addr{}, false
}

func containsAddr(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
