package tunnel

import (
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/tun/tuntest"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
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
// With rate control the paths pace at a high target and their datagrams
// carry the per-path sequence number, as after the peer negotiated "rate".
func allocsBond(t *testing.T, dev *discardTUN, fopts FECOptions, rate bool) *Bond {
	t.Helper()
	popts := PathOptions{}
	if rate {
		popts.RateControl = RateControlBondd
	}
	b, err := newBond("van-1", dev, bondOptions{mtu: testMTU, paths: popts.withDefaults(),
		fec: fopts.withDefaults(), log: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, name := range []string{"a", "b"} {
		p, _ := b.pathFor(name, nil)
		p.state.SetConnected(true, now)
		p.state.OnMetrics(20*time.Millisecond, 20*time.Millisecond, 1<<20, 0)
		if rate {
			p.rc.setPeer(ctrlmsg.CapRate, now)
			p.rc.target.Store(math.Float64bits(1e12)) // never waits: the test counts allocations, not time
			p.state.OnRateEstimate(1e12, 0, 0, now)
		}
	}
	return b
}

// TestBondSendAllocs checks that Bond.send as a whole (classification
// skipped without rules, path pick, FEC block and parity, header, queue
// push) allocates nothing per packet once warm, with and without rate
// control. The send routine's pacer check, pop and stamp stand in for the
// connection: each frame queued is popped and its buffer returned.
func TestBondSendAllocs(t *testing.T) {
	for _, tc := range []struct {
		fopts FECOptions
		rate  bool
		hole  bool // path a's datagram budget does not carry the packets (pmtu.go)
	}{{FECOptions{Mode: FECOff}, false, false}, {FECOptions{Mode: FECFixed, Ratio: 0.25}, false, false},
		{FECOptions{Mode: FECOff}, true, false}, {FECOptions{Mode: FECFixed, Ratio: 0.25}, true, false},
		{FECOptions{Mode: FECFixed, Ratio: 0.25}, false, true}} {
		fopts := tc.fopts
		t.Run(fmt.Sprint(fopts.Mode, " rate=", tc.rate, " hole=", tc.hole), func(t *testing.T) {
			b := allocsBond(t, &discardTUN{Device: tuntest.New(testMTU, 1)}, fopts, tc.rate)
			if tc.hole {
				b.paths.Load().paths[0].pmtu.budget.Store(pmtuBase)
				b.minBudget.Store(pmtuBase)
			}
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
					for p.rc.pace(now) == 0 { // the send routine: pacer, pop, stamp
						f, ok, _ := p.queue.pop(monoclock.Nanos(now))
						if !ok {
							break
						}
						p.rc.release(f.bytes(), now)
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
			if tc.hole && s.Paths[0].TxPackets != 0 {
				t.Fatalf("%d datagrams on the path whose budget does not carry them", s.Paths[0].TxPackets)
			}
		})
	}
}

// TestBondReceiveAllocs checks that Bond.receive as a whole (header,
// duplicate filter, FEC decoder, inner packet checks, TUN write) allocates
// nothing per datagram once warm, for plain and FEC-protected datagrams,
// and with the path's rate meter in front of it.
func TestBondReceiveAllocs(t *testing.T) {
	for _, tc := range []struct{ fecOn, rate bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		fecOn := tc.fecOn
		t.Run(fmt.Sprint("fec=", fecOn, " rate=", tc.rate), func(t *testing.T) {
			dev := &discardTUN{Device: tuntest.New(testMTU, 1)}
			b := allocsBond(t, dev, FECOptions{Mode: FECOff}, tc.rate)
			p := b.paths.Load().paths[0]
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
				if tc.rate {
					h.Flags |= FlagPathSeq
					h.PathSeq = uint32(seq)
				}
				seq++
				dg = append(AppendHeader(dg[:0], &h), pkt...)
				if tc.rate {
					p.rc.onDatagram(dg, time.Now()) // pathConn.routineReceive's meter
				}
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
