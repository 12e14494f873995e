package tunnel

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/monoclock"
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
//     d. classifies it, fills the annotations (leo_state, pending_iframe)
//        from the path state and evaluates the rules in force (rules.go),
//     e. picks the path(s) from the directive, the affinity history and
//        the bond's Picker (policy.Select), and feeds the pending I-frame
//        tracker with the packet's frame type, size and path; with rate
//        control, a path DEGRADED for loss gets a free copy now and then
//        so its loss figure stays current (probeLossy, ratectl.go); a
//        video frame's packet gets a deadline sized to the frame
//        (objdeadline.go),
//     f. for a flow the peer must deliver in order (reseqWait: MPEG-TS
//        over UDP, or a rule's resequence_ms), writes the flow tag
//        in front of the inner packet (flowtag.go), when the peer
//        announced ctrlmsg.CapFlowTags,
//     g. adds the packet (with its tag) to the open FEC block (fec.go;
//        a video packet's block gets the parity of VideoResidual),
//        and writes the bondd header into the headroom in place,
//     h. pushes the frame on the chosen path's send queue (never blocks),
//        and the block's parity after it when the packet filled the block.
//  2. pathConn.routineSend, one per live path connection (pathconn.go),
//     pops frames, highest priority first, and hands them to
//     quic.Conn.SendDatagram, which copies them; the buffer then goes back
//     to the pool. It exits while the bond sleeps (idle.go).

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
		b.drops.add(DropLinkLocal)
		return false
	}
	b.touch(now)                 // data: wakes an idle bond (idle.go)
	mtu := int(b.sendMTU.Load()) // the configured MTU, or less while no path carries it (pmtu.go)
	if n > mtu {
		b.drops.add(DropOversize)
		b.replyTooBig(pkt, mtu)
		return false
	}
	if n > 0 && b.clampMSS(pkt, mtu) {
		b.ctr.mssClamped.Add(1)
	}
	protect, expires, prio := b.fecTx != nil, int64(0), uint8(0)
	set := b.paths.Load()
	var dir *rules.Directive
	var md *classify.Metadata
	var obj policy.Object
	if b.rules != nil && b.rules.evaluate(pkt, set.states, now) {
		dir, md, obj = &b.rules.dir, &b.rules.md, b.rules.object()
		prio = dir.Priority // 0 unless a rule set it
		protect = protect && !b.rules.fecOff()
		if d := b.rules.deadline(); d > 0 {
			expires = monoclock.Nanos(now.Add(d))
		}
	}
	if len(b.picks) < len(set.paths) { // a path was added (only this goroutine touches picks)
		b.picks = make([]int, len(set.paths))
	}
	// Only paths whose datagram budget carries the packet (pmtu.go).
	states, idx := b.fitStates(set, n+HeaderBudget, &b.fit)
	k := policy.Select(b.picker, dir, obj, states, now, b.picks, &b.sel)
	if k == 0 && idx != nil { // no budget carries it: a path whose budget fell on suspicion holds it for the probe
		states, idx = b.fit.fitConfirmed(set, n+HeaderBudget)
		k = policy.Select(b.picker, dir, obj, states, now, b.picks, &b.sel)
	}
	remap(b.picks, k, idx)
	if k == 0 {
		b.drops.add(DropNoPath)
		return false
	}
	if dir != nil {
		b.rules.track(set.states, b.picks[:k], n, now)
	}
	tags := b.peerTags.Load()
	if md == nil && (tags || protect) { // no rule set in force: classify for the defaults alone
		b.classifier().Parse(pkt, &b.md)
		md = &b.md
	}
	tl := 0 // flow tag length, in front of the inner packet
	if tags {
		tl = b.flows.tagPacket(buf, md, dir, now)
	}
	f := frame{buf: buf, end: Headroom + n, enqueued: monoclock.Nanos(now), expires: expires, ruled: expires != 0, prio: prio,
		movable: k == 1 && (dir == nil || dir.NumPreferences == 0 && dir.Affinity == classify.KeyInvalid &&
			!(obj.Valid() && dir.Balancing == rules.SinglePath))}
	if md != nil && md.Has(classify.KeyFrameID) {
		f.obj, f.hasObj = md.FrameID(), true
		f.isKey = md.Has(classify.KeyFrameType) && md.FrameType == classify.FrameKey
		if fb := b.objs.add(f.obj, n); f.isKey {
			// A keyframe waits as long as sending all of it takes.
			base := b.popts.MaxQueueDelay
			if expires != 0 {
				base = time.Duration(expires - f.enqueued)
			}
			if d := objectDeadline(fb, pathRateBps(set.states[b.picks[0]]), base, DefaultObjectMargin); d > base {
				f.expires = f.enqueued + int64(d)
			}
		}
	}
	k = b.probeLossy(set, b.picks, k, n+HeaderBudget, now) // keep a lossy path's loss figure fresh
	h := Header{Type: TypeData, Seq: b.seq.Add(1) - 1, Timestamp: uint64(monoclock.Micros(now))}
	if tl > 0 {
		h.Flags |= FlagFlow
		b.ctr.flowTagged.Add(1)
	}
	video := md != nil && md.Has(classify.KeyCodec) && md.Codec.IsVideo()
	sealed := protect && b.protect(buf[Headroom-tl:Headroom+n], b.picks[0], video, &h, now)
	b.flagPathSeq(&h, tl, n)
	off := Headroom - tl - HeaderLen(&h)
	AppendHeader(buf[off:off], &h)
	f.off = off
	for _, i := range b.picks[1:k] {
		dup := getBuf()
		copy(dup[off:f.end], buf[off:f.end])
		d := f
		d.buf, d.movable = dup, false
		set.paths[i].queue.push(d)
	}
	set.paths[b.picks[0]].queue.push(f)
	b.ctr.txPackets.Add(1)
	if sealed {
		b.sendParity(&b.fecTx.par, b.picks, &b.fit, now)
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

// clampMSS lowers the MSS option of a TCP SYN to what the tunnel MTU,
// mtu bytes, carries.
func (b *Bond) clampMSS(pkt []byte, mtu int) bool {
	return tun.ClampMSS(pkt, tun.MSSForMTU(mtu, pkt[0]>>4 == 6))
}

// replyTooBig writes an ICMP "fragmentation needed" (IPv4) or ICMPv6
// "packet too big" back into the TUN for an oversize packet, with the
// tunnel MTU mtu (bytes).
func (b *Bond) replyTooBig(pkt []byte, mtu int) {
	// The reply starts after MinWriteOffset bytes of headroom for the TUN
	// write; it comes from the packet's destination address.
	out, ok := tun.AppendPacketTooBig(b.icmpBuf[:tun.MinWriteOffset], pkt, mtu, netip.Addr{})
	if !ok {
		return
	}
	b.wbuf[0] = out
	if _, err := b.dev.Write(b.wbuf, tun.MinWriteOffset); err != nil {
		b.drops.add(DropTUNWrite)
		return
	}
	b.ctr.icmpSent.Add(1)
}

// routineSend hands the path's queued frames to conn, the path's
// connection, until conn ends. It pops from the path's queue when quic-go
// can take a datagram without holding it back (pathConn.mayHand). When
// SendDatagram fails the connection is going away: the path is marked down
// and its frames move to other paths. While the bond sleeps with nothing
// queued it returns early (pathConn.idleExit); the bond's wake or a frame
// queued later starts it again (pathConn.resumeSend, pathConn.kick).
func (pc *pathConn) routineSend(conn *quic.Conn) {
	p := pc.path
	done := conn.Context().Done()
	idle := false
	defer func() {
		if !idle {
			pc.sendExited()
		}
	}()
	// Whoever stops taking frames passes the doorbell on, so that a push
	// that woke this routine is not lost to the next connection's.
	defer p.queue.ringIfQueued()
	var tooLarge *quic.DatagramTooLargeError
	// held keeps this connection's data datagrams until their packets are
	// settled (resend.go); without a recorder nothing is kept.
	held := &resendState{closed: true}
	if rec := pc.rec.Load(); rec != nil {
		held = &rec.held
	}
	pace := time.NewTimer(time.Hour) // the pacer's wait (ratectl.go)
	defer pace.Stop()
	for !pc.draining.Load() {
		if !pc.mayHand() {
			p.queue.ringIfQueued()
			select {
			case <-pc.bell:
			case <-done:
				return
			}
			continue
		}
		// Frames wait in the queue, where deadlines act: for the pacer
		// (ratectl.go), and through a LEO path's scheduled reconfiguration
		// outage (policy.LEOReconf.Hold).
		now := time.Now()
		if d := max(p.rc.pace(now), p.state.LEOHold(now)); d > 0 {
			pace.Reset(d)
			select {
			case <-pace.C:
			case <-done:
				return
			}
			continue
		}
		f, ok, more := p.queue.pop(monoclock.Now())
		if !ok {
			if p.bond.asleep() && pc.idleExit() {
				idle = true
				return
			}
			if !p.queue.wait(done) {
				return
			}
			continue
		}
		if more {
			p.queue.ring()
		}
		if f.end-f.off > int(p.pmtu.budget.Load()) { // queued before the path's budget fell (pmtu.go)
			p.rerouteOversize(f, time.Now())
			continue
		}
		pc.unsent.Add(1)
		p.rc.release(f.bytes(), time.Now())    // per-path sequence number, pacer tokens
		kept := held.hand(f, p.resendable(&f)) // before quic-go can pack it (resend.go)
		err := conn.SendDatagram(f.bytes())
		if err != nil && kept {
			kept = !held.unhand(f.buf) // true: a packet took it after all, the held ring frees it
		}
		switch {
		case err == nil:
			p.txPackets.Add(1)
			p.txBytes.Add(uint64(f.end - f.off))
			p.state.OnBytes(f.end-f.off, time.Now()) // byte budget and per-label counts
		case errors.As(err, &tooLarge):
			pc.unsent.Add(-1)
			p.drops.add(DropTooLarge)
		default:
			pc.unsent.Add(-1)
			p.drops.add(DropSendError)
			conn.CloseWithError(codeProtocol, "sending a datagram failed") // a no-op if it is closing already
			down := p.connDown(conn)
			switch {
			case down && kept: // the held ring owns f
				p.rescue(nil)
			case down:
				p.rescue(&f)
			case !kept:
				p.queue.requeue(f) // a newer connection sends it
			}
			return
		}
		if !kept {
			putBuf(f.buf)
		}
	}
}
