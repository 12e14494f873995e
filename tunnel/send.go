package tunnel

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun"
)

// The send path, TUN → network. Two kinds of goroutine:
//
//  1. routineReadTUN, one per TUN device, reads batches of inner packets at
//     offset Headroom into pooled buffers and, for each packet:
//     a. finds the bond (edge: its one bond; concentrator: by destination
//        prefix),
//     b. answers a packet longer than the MTU with an ICMP error,
//     c. clamps the MSS of TCP SYNs to the tunnel MTU,
//     d. classifies it and evaluates the rules in force (rules.go),
//     e. asks the bond's Picker for a path,
//     f. adds the packet to the open FEC block (fec.go),
//     g. writes the bondd header into the headroom in place,
//     h. pushes the frame on the chosen path's send queue (never blocks),
//        and the block's parity after it when the packet filled the block.
//  2. path.routineSend, one per live connection, pops frames in order and
//     hands them to quic.Conn.SendDatagram, which copies them; the buffer
//     then goes back to the pool.

// routineReadTUN reads dev until it is closed. route maps an inner packet to
// its bond, or nil to drop it (counted by the caller's route function).
func routineReadTUN(dev tun.Device, log *slog.Logger, route func(pkt []byte) *Bond) {
	log.Debug("routineReadTUN started")
	defer log.Debug("routineReadTUN stopped")
	batch := max(dev.BatchSize(), 1)
	bufs := make([]*packetBuf, batch)
	raw := make([][]byte, batch)
	sizes := make([]int, batch)
	for i := range bufs {
		bufs[i] = getBuf()
		raw[i] = bufs[i][:]
	}
	defer func() {
		for _, b := range bufs {
			putBuf(b)
		}
	}()
	var lastErr time.Time
	for {
		n, err := dev.Read(raw, sizes, Headroom)
		now := time.Now()
		for i := range n {
			pkt := raw[i][Headroom : Headroom+sizes[i]]
			b := route(pkt)
			if b == nil {
				continue
			}
			if b.send(bufs[i], sizes[i], now) {
				bufs[i] = getBuf()
				raw[i] = bufs[i][:]
			}
		}
		switch {
		case err == nil, errors.Is(err, tun.ErrTooManySegments):
		case errors.Is(err, os.ErrClosed):
			return
		default:
			// Keep reading: a device that fails for good is closed by its
			// owner. Log at most once a second, and do not spin.
			if now.Sub(lastErr) > time.Second {
				log.Error("reading the TUN failed", "err", err)
				lastErr = now
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// send takes the inner packet at buf[Headroom:Headroom+n] and queues it on
// the chosen path. It reports whether it kept buf (the caller then needs a
// new buffer). Called only from the TUN reader goroutine.
func (b *Bond) send(buf *packetBuf, n int, now time.Time) (kept bool) {
	pkt := buf[Headroom : Headroom+n]
	if dst, ok := innerDest(pkt); ok && linkScope(dst) {
		// Link-local traffic (the kernel's IPv6 router solicitations on the
		// TUN, mDNS, …) has no business on the other side of a routed tunnel.
		b.ctr.linkLocal.Add(1)
		return false
	}
	if n > b.mtu {
		b.ctr.oversize.Add(1)
		b.replyTooBig(pkt)
		return false
	}
	if n > 0 && b.clampMSS(pkt) {
		b.ctr.mssClamped.Add(1)
	}
	protect, expires := b.fecTx != nil, int64(0)
	var dir *rules.Directive
	if b.rules != nil && b.rules.evaluate(pkt) {
		dir = &b.rules.dir
		protect = protect && !b.rules.fecOff()
		if d := b.rules.deadline(); d > 0 {
			expires = now.Add(d).UnixNano()
		}
	}
	set := b.paths.Load()
	if len(b.picks) < len(set.paths) { // a path was added (only this goroutine touches picks)
		b.picks = make([]int, len(set.paths))
	}
	k := policy.Select(b.picker, dir, set.states, now, b.picks, &b.sel)
	if k == 0 {
		b.ctr.noPath.Add(1)
		return false
	}
	h := Header{Type: TypeData, Seq: b.seq.Add(1) - 1, Timestamp: uint64(now.UnixMicro())}
	sealed := protect && b.protect(pkt, b.picks[0], &h, now)
	off := Headroom - HeaderLen(&h)
	AppendHeader(buf[off:off], &h)
	f := frame{buf: buf, off: off, end: Headroom + n, enqueued: now.UnixNano(), expires: expires}
	for _, i := range b.picks[1:k] {
		dup := getBuf()
		copy(dup[off:f.end], buf[off:f.end])
		set.paths[i].queue.push(frame{buf: dup, off: off, end: f.end, enqueued: f.enqueued, expires: expires})
	}
	set.paths[b.picks[0]].queue.push(f)
	b.ctr.txPackets.Add(1)
	if sealed {
		b.sendParity(&b.fecTx.par, b.picks, now)
	}
	return true
}

// linkScope reports whether a is link-local unicast (169.254.0.0/16,
// fe80::/10) or link-scope multicast (224.0.0.0/24, ff02::/16): addresses
// that mean "this link" and must not be routed (RFC 3927, RFC 4291 §2.5.6
// and §2.7).
func linkScope(a netip.Addr) bool {
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()
}

// clampMSS lowers the MSS option of a TCP SYN to what the tunnel MTU carries.
func (b *Bond) clampMSS(pkt []byte) bool {
	return tun.ClampMSS(pkt, tun.MSSForMTU(b.mtu, pkt[0]>>4 == 6))
}

// replyTooBig writes an ICMP "fragmentation needed" (IPv4) or ICMPv6
// "packet too big" back into the TUN for an oversize packet.
func (b *Bond) replyTooBig(pkt []byte) {
	// The reply starts after MinWriteOffset bytes of headroom for the TUN
	// write; it comes from the packet's destination address.
	out, ok := tun.AppendPacketTooBig(b.icmpBuf[:tun.MinWriteOffset], pkt, b.mtu, netip.Addr{})
	if !ok {
		return
	}
	b.wbuf[0] = out
	if _, err := b.dev.Write(b.wbuf, tun.MinWriteOffset); err != nil {
		b.ctr.tunWrite.Add(1)
		return
	}
	b.ctr.icmpSent.Add(1)
}

// routineSend hands the path's queued frames to conn until conn ends. When
// SendDatagram fails the connection is going away: the path is marked down
// at once and its frames move to other paths.
func (p *path) routineSend(conn *quic.Conn) {
	done := conn.Context().Done()
	var tooLarge *quic.DatagramTooLargeError
	for p.queue.wait(done) {
		for {
			f, ok := p.queue.pop(time.Now().UnixNano())
			if !ok {
				break
			}
			err := conn.SendDatagram(f.bytes())
			switch {
			case err == nil:
				p.txPackets.Add(1)
				p.txBytes.Add(uint64(f.end - f.off))
			case errors.As(err, &tooLarge):
				p.tooLarge.Add(1)
			default:
				p.sendErr.Add(1)
				p.state.SetConnected(false, time.Time{})
				p.rescue(&f)
				return
			}
			putBuf(f.buf)
		}
	}
}
