package tunnel

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/tun/tuntest"
)

// discardTUN is a stand-in TUN whose Write counts packets and keeps
// nothing, so that it does not allocate (tuntest.Device copies each one).
type discardTUN struct {
	*tuntest.Device
	written atomic.Uint64
}

func (d *discardTUN) Write(bufs [][]byte, offset int) (int, error) {
	d.written.Add(uint64(len(bufs)))
	return len(bufs), nil
}

// allocsBond returns a bond over dev with two connected paths and the
// given FEC options, with congestion state so that parity has window room.
func allocsBond(t *testing.T, dev *discardTUN, fopts FECOptions) *Bond {
	t.Helper()
	b, err := newBond("van-1", dev, bondOptions{mtu: testMTU, paths: PathOptions{}.withDefaults(),
		fec: fopts.withDefaults(), log: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, name := range []string{"a", "b"} {
		p, _ := b.pathFor(name, nil)
		p.state.SetConnected(true, now)
		p.state.OnMetrics(20*time.Millisecond, 20*time.Millisecond, 1<<20, 0)
	}
	return b
}

// TestBondSendAllocs checks that Bond.send as a whole (classification
// skipped without rules, path pick, FEC block and parity, header, queue
// push) allocates nothing per packet once warm. A lane's pop stands in
// for the connection: each frame queued is popped and its buffer returned.
func TestBondSendAllocs(t *testing.T) {
	for _, fopts := range []FECOptions{{Mode: FECOff}, {Mode: FECFixed, Ratio: 0.25}} {
		t.Run(fopts.Mode, func(t *testing.T) {
			b := allocsBond(t, &discardTUN{Device: tuntest.New(testMTU, 1)}, fopts)
			pkt := udp4(edgeAddr, srvAddr, make([]byte, 1000))
			set := b.paths.Load()
			buf := getBuf()
			one := func() {
				n := copy(buf[Headroom:], pkt)
				now := time.Now()
				if b.send(buf, n, now) {
					buf = getBuf()
				}
				for _, p := range set.paths {
					for {
						f, ok, _ := p.queue.pop(now.UnixNano())
						if !ok {
							break
						}
						putBuf(f.buf)
					}
				}
			}
			for range 200 { // warm the pools, the FEC codecs and the path's queue bands
				one()
			}
			if a := testing.AllocsPerRun(1000, one); a != 0 {
				t.Fatalf("Bond.send allocates %v times per packet", a)
			}
			s := b.Stats()
			if s.TxPackets == 0 || s.Drops[DropNoPath] != 0 {
				t.Fatalf("sent %d packets, %d without a path", s.TxPackets, s.Drops[DropNoPath])
			}
			if fopts.Mode == FECFixed && s.FEC.ParitySent == 0 {
				t.Fatalf("no parity sent: FEC stats %+v", s.FEC)
			}
		})
	}
}

// TestBondReceiveAllocs checks that Bond.receive as a whole (header,
// duplicate filter, FEC decoder, inner packet checks, TUN write) allocates
// nothing per datagram once warm, for plain and FEC-protected datagrams.
func TestBondReceiveAllocs(t *testing.T) {
	for _, fecOn := range []bool{false, true} {
		t.Run(fmt.Sprint("fec=", fecOn), func(t *testing.T) {
			dev := &discardTUN{Device: tuntest.New(testMTU, 1)}
			b := allocsBond(t, dev, FECOptions{Mode: FECOff})
			b.allowed = []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}
			pkt := udp4(edgeAddr, srvAddr, make([]byte, 1000))
			wbuf, rec := make([][]byte, 1), newRecovered(testMTU)
			dg := make([]byte, 0, MaxHeaderLen+len(pkt))
			var seq uint64
			one := func() {
				h := Header{Type: TypeData, Seq: seq, Timestamp: uint64(seq)}
				if fecOn {
					h.Flags, h.Block, h.Index, h.K = FlagFEC, seq/4, uint16(seq%4), 4
				}
				seq++
				dg = append(AppendHeader(dg[:0], &h), pkt...)
				b.receive(dg, wbuf, rec)
			}
			for range 200 {
				one()
			}
			before := dev.written.Load()
			if a := testing.AllocsPerRun(1000, one); a != 0 {
				t.Fatalf("Bond.receive allocates %v times per datagram", a)
			}
			if got := dev.written.Load() - before; got != 1001 {
				t.Fatalf("%d packets written to the TUN for 1001 datagrams; drops %v", got, b.Stats().Drops)
			}
		})
	}
}
