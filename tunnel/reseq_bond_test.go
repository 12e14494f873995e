package tunnel

import (
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/testkit"

	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun/tuntest"
)

// Per-flow resequencing end to end: an edge and a concentrator over three
// emulated paths of different delays and loss, with a round-robin picker
// so that consecutive packets of a flow take different paths and arrive
// out of order. An MPEG-TS-over-UDP flow must come out of the far TUN in
// order (a packet written after a later one of its flow only when the
// resequencer gave its gap up, counted as late), and so must a TCP flow
// that a rule's resequence_ms holds; by default TCP and RTP are not held,
// so they arrive as the paths reorder them.

// Flow kinds of the test traffic.
const (
	flowTCP = iota
	flowTS
	flowRTP
	numFlowKinds
)

var flowKindNames = [numFlowKinds]string{"tcp", "ts", "rtp"}

// flowPacket builds packet number i of a test flow of kind from src to dst,
// with i in the payload where flowSeqOf finds it.
func flowPacket(kind int, src, dst netip.AddrPort, i uint32) []byte {
	switch kind {
	case flowTCP:
		return tcpData4(src, dst, i, 600)
	case flowTS:
		p := make([]byte, 6*188) // six TS packets: seven (1316 bytes) pass the 1200-byte test MTU
		for off := 0; off < len(p); off += 188 {
			p[off], p[off+1], p[off+2], p[off+3] = 0x47, 0x01, 0x00, 0x10|byte(i)&0x0f
		}
		binary.BigEndian.PutUint32(p[4:], i)
		return udp4(src, dst, p)
	default:
		p := make([]byte, 600)
		p[0], p[1] = 0x80, 96 // RTP version 2, dynamic payload type
		binary.BigEndian.PutUint16(p[2:], uint16(i))
		binary.BigEndian.PutUint32(p[4:], i*3600) // timestamp: one frame per packet
		binary.BigEndian.PutUint32(p[8:], 0x1234) // SSRC
		binary.BigEndian.PutUint32(p[12:], i)
		return udp4(src, dst, p)
	}
}

// flowSeqOf returns the kind and packet number of a packet flowPacket built.
func flowSeqOf(pkt []byte) (kind int, i uint32, ok bool) {
	if len(pkt) < 28 {
		return 0, 0, false
	}
	switch {
	case pkt[9] == 6 && len(pkt) >= 44:
		return flowTCP, binary.BigEndian.Uint32(pkt[24:]), true // the TCP sequence number
	case pkt[9] == 17 && len(pkt) >= 28+16 && pkt[28] == 0x47:
		return flowTS, binary.BigEndian.Uint32(pkt[32:]), true
	case pkt[9] == 17 && len(pkt) >= 28+16:
		return flowRTP, binary.BigEndian.Uint32(pkt[40:]), true
	}
	return 0, 0, false
}

// tcpData4 builds an IPv4 TCP ACK segment with n payload bytes whose
// sequence number is seq, with valid checksums.
func tcpData4(src, dst netip.AddrPort, seq uint32, n int) []byte {
	l := 40 + n
	pkt := make([]byte, l)
	pkt[0], pkt[8], pkt[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(pkt[2:], uint16(l))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(pkt[12:], s[:])
	copy(pkt[16:], d[:])
	tcp := pkt[20:]
	binary.BigEndian.PutUint16(tcp[0:], src.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12], tcp[13], tcp[14], tcp[15] = 5<<4, 0x10, 0xff, 0xff // 20-byte header, ACK
	c := ^fold(sum(0, pkt[:20]))
	pkt[10], pkt[11] = byte(c>>8), byte(c)
	c = ^fold(sum(sum(0, pkt[12:20])+6+uint64(len(tcp)), tcp))
	tcp[16], tcp[17] = byte(c>>8), byte(c)
	return pkt
}

// lossyLink is a link with the same delay, rate and loss both ways.
func lossyLink(delay time.Duration, loss float64) emu.RelayLink {
	l := emu.LinkConfig{Delay: delay, Rate: 50 * emu.Mbps, Loss: loss}
	return emu.RelayLink{Up: l, Down: l}
}

// orderResult is what one direction's run saw per flow kind.
type orderResult struct {
	got, outOfOrder [numFlowKinds]int
}

// runFlows sends n packets of each flow kind, interleaved, every 2 ms, into
// from, and reads to until quiet, counting per kind what arrived and how
// many writes came after a later packet of their flow.
func runFlows(t *testing.T, from, to *tuntest.Device, src, dst netip.AddrPort, n int) orderResult {
	t.Helper()
	var res orderResult
	var top [numFlowKinds]int64
	for k := range top {
		top[k] = -1
	}
	read := func(pkt []byte) {
		k, i, ok := flowSeqOf(pkt)
		if !ok {
			t.Fatalf("unexpected packet of %d bytes", len(pkt))
		}
		res.got[k]++
		if int64(i) < top[k] {
			res.outOfOrder[k]++
		}
		top[k] = max(top[k], int64(i))
	}
	tick := time.NewTicker(2 * time.Millisecond) // about 10 Mbit/s in all
	defer tick.Stop()
	for i := range n {
		for k := range numFlowKinds {
			sp := netip.AddrPortFrom(src.Addr(), src.Port()+uint16(k))
			if err := from.Inject(flowPacket(k, sp, dst, uint32(i))); err != nil {
				t.Fatal(err)
			}
		}
	drain:
		for {
			select {
			case pkt := <-to.Outbound():
				read(pkt)
			case <-tick.C:
				break drain
			}
		}
	}
	// 400 ms without a packet: nothing is on its way over 60-ms paths, and
	// the resequencer's wait (at most DefaultResequenceWait) has passed.
	for {
		select {
		case pkt := <-to.Outbound():
			read(pkt)
		case <-time.After(400 * time.Millisecond):
			return res
		}
	}
}

func TestBondResequencesFlows(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the emulated-path resequencing runs in -short mode")
	}
	compile := func(name, src string) *rules.Set {
		set, err := rules.CompileBytes(name, []byte(src), rules.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	off := compile("reseq-off.yaml", `
rules:
  - id: no-reseq
    priority: 0
    actions: {resequence_ms: 0}
`)
	tcpOn := compile("reseq-tcp.yaml", `
rules:
  - id: tcp-in-order
    priority: 0
    match: {proto: tcp}
    actions: {resequence_ms: 150}
`)
	cases := []struct {
		name string
		set  *rules.Set // on the edge; nil: the defaults
		// held: the kinds of flow the edge's packets are held for; the
		// concentrator has no rule set, so its packets get the defaults.
		held [numFlowKinds]bool
	}{
		{"defaults", nil, [numFlowKinds]bool{flowTS: true}},
		{"tcp resequence_ms 150", tcpOn, [numFlowKinds]bool{flowTCP: true, flowTS: true}},
		{"resequence_ms 0", off, [numFlowKinds]bool{}},
	}
	defaults := cases[0].held
	const n = 400
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testkit.CheckLeaks(t)
			rr, err := policy.NewPicker(policy.SchedulerRoundRobin)
			if err != nil {
				t.Fatal(err)
			}
			tb := newTestBondWith(t, token, 3, func(o *EdgeOptions) {
				o.Picker = rr
				if c.set != nil {
					src := &staticRules{}
					src.set.Store(c.set)
					o.Rules = src
				}
				viaRelays(t, o, []emu.RelayLink{lossyLink(5*time.Millisecond, 0.01), lossyLink(15*time.Millisecond, 0.02), lossyLink(30*time.Millisecond, 0.01)}, 7)
			})
			tb.waitActive(t, 3)
			waitFor(t, func() bool { return tb.edge.Bond().peerTags.Load() && tb.conc.Bond("van-1").peerTags.Load() })
			dirs := []struct {
				name     string
				from, to *tuntest.Device
				tx, rx   *Bond
				src, dst netip.AddrPort
			}{
				{"edge→concentrator", tb.edgeDev, tb.concDev, tb.edge.Bond(), tb.conc.Bond("van-1"), edgeAddr, srvAddr},
				{"concentrator→edge", tb.concDev, tb.edgeDev, tb.conc.Bond("van-1"), tb.edge.Bond(), srvAddr, edgeAddr},
			}
			for _, d := range dirs {
				before := d.rx.Stats().Reseq
				res := runFlows(t, d.from, d.to, d.src, d.dst, n)
				tx, rs := d.tx.Stats(), d.rx.Stats().Reseq
				late := rs.Late - before.Late
				t.Logf("%s: got %v of %d, out of order %v; tagged %d; reseq %+v; rx drops %v fec %+v", d.name, res.got, n, res.outOfOrder, tx.FlowTagged, *rs, d.rx.Stats().Drops, *d.rx.Stats().FEC)
				for _, p := range tx.Paths {
					t.Logf("  tx path %s: tx %d drops %v cwnd %d srtt %v", p.Name, p.TxPackets, p.Drops, p.CongestionWindow, p.SmoothedRTT)
				}
				for k := range numFlowKinds {
					if res.got[k] < n*3/4 { // loss, and send-queue drops on a loaded machine
						t.Errorf("%s %s: %d of %d packets arrived", d.name, flowKindNames[k], res.got[k], n)
					}
				}
				held := c.held
				if d.tx == tb.conc.Bond("van-1") { // the rule is the edge's
					held = defaults
				}
				// How much the paths reordered: what the resequencer held,
				// and what arrived out of order unheld. Below
				// minReordered the scheduler kept nearly everything on
				// one path (a loaded machine, under the race detector),
				// and an unheld flow may arrive in order by chance.
				reordered := int(rs.Held - before.Held)
				for k := range numFlowKinds {
					if !held[k] {
						reordered += res.outOfOrder[k]
					}
				}
				ooo, heldAny := 0, false
				for k := range numFlowKinds {
					switch {
					case held[k]:
						ooo += res.outOfOrder[k]
						heldAny = true
					case res.outOfOrder[k] == 0 && reordered >= minReordered:
						t.Errorf("%s: the %s flow is not held, yet it arrived in order: held, or the paths did not reorder", d.name, flowKindNames[k])
					case res.outOfOrder[k] == 0:
						t.Logf("%s: the %s flow arrived in order; the paths reordered only %d packets", d.name, flowKindNames[k], reordered)
					}
				}
				if uint64(ooo) > late {
					t.Errorf("%s: %d packets of held flows out of order (%v), only %d written late", d.name, ooo, res.outOfOrder, late)
				}
				if heldAny && rs.Held == before.Held {
					t.Errorf("%s: nothing held: the paths did not reorder, the test proves nothing", d.name)
				}
			}
			if c.set == off {
				if tagged := tb.edge.Bond().Stats().FlowTagged; tagged != 0 {
					t.Errorf("resequence_ms 0: the edge tagged %d packets", tagged)
				}
			}
		})
	}
}

// minReordered is the least reordering (packets held or out of order) at
// which TestBondResequencesFlows expects every unheld flow to see some.
const minReordered = 20

// TestBondTaggedAllocs checks that tagging an MPEG-TS-over-UDP flow
// (classification without a rule set, the flow table, the tag in front of
// the FEC-protected packet) keeps
// Bond.send allocation-free, and that Bond.receive of tagged datagrams,
// in order and reordered (held, then released), does too.
func TestBondTaggedAllocs(t *testing.T) {
	dev := &discardTUN{Device: tuntest.New(testMTU, 1)}
	b := allocsBond(t, dev, FECOptions{Mode: FECFixed, Ratio: 0.25}, true)
	b.peerTags.Store(true)
	pkt := flowPacket(flowTS, edgeAddr, srvAddr, 1)
	set := b.paths.Load()
	var frames [][]byte // what send queued, for the receive half
	buf := getBuf()
	send := func(keep bool) {
		n := copy(buf[Headroom:], pkt)
		now := time.Now()
		if b.send(buf, n, now) {
			buf = getBuf()
		}
		for _, p := range set.paths {
			for {
				f, ok, _ := p.queue.pop(monoclock.Nanos(now))
				if !ok {
					break
				}
				if keep {
					frames = append(frames, append([]byte(nil), f.bytes()...))
				}
				putBuf(f.buf)
			}
		}
	}
	for range 200 {
		send(false)
	}
	if a := testing.AllocsPerRun(1000, func() { send(false) }); a != 0 {
		t.Fatalf("Bond.send of a tagged flow allocates %v times per packet", a)
	}
	if s := b.Stats(); s.FlowTagged == 0 || s.FlowTagged != s.TxPackets {
		t.Fatalf("%d of %d packets tagged", s.FlowTagged, s.TxPackets)
	}

	for range 400 {
		send(true)
	}
	rx := allocsBond(t, dev, FECOptions{Mode: FECOff}, true)
	wbuf, rec := make([][]byte, 1), newRecovered(testMTU)
	dg := make([]byte, 0, Headroom+len(pkt))
	i := 0
	recv := func() {
		j := i ^ 1 // swap each pair: every other packet waits for the one before it
		i++
		dg = append(dg[:0], frames[j%len(frames)]...)
		rx.receive(dg, wbuf, rec)
	}
	for range 200 {
		recv()
	}
	before := rx.Stats().Reseq.Held
	if a := testing.AllocsPerRun(100, recv); a != 0 {
		t.Fatalf("Bond.receive of reordered tagged datagrams allocates %v times per datagram", a)
	}
	if rs := rx.Stats().Reseq; rs.Held == before {
		t.Fatalf("nothing held: %+v", *rs)
	}
}
