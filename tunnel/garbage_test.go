package tunnel

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestGarbageFlood floods the concentrator's listen port with 2,000
// garbage datagrams a second (not QUIC, short headers of no connection,
// malformed long headers) while a 1 kHz probe crosses the bond, and checks
// that every kind is counted by reason and that the probe loses at most
// 0.1 %.
func TestGarbageFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the flood in -short mode")
	}
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) { o.FEC = FECOptions{Mode: FECOff} })
	tb.waitActive(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The flood: three kinds in turn, 2 every millisecond.
	flood, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	target := tb.conc.opts.Conn.LocalAddr()
	var flooded atomic.Int64
	var kinds [4]atomic.Int64 // not QUIC, short header ≤ 42 bytes, short header > 42 bytes, long header
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 1200)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start, i := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// 2 per millisecond, catching up on ticks a busy machine missed.
			for ; i < int(2*time.Since(start)/time.Millisecond); i++ {
				j := 0
				n := 40 + rng.IntN(1100)
				for k := range buf[:n] {
					buf[k] = byte(rng.Uint32())
				}
				kind := (i + j) % 4
				switch kind {
				case 0:
					buf[0] &^= 0xc0 // 00: not QUIC
				case 1, 2:
					buf[0] = buf[0]&^0x80 | 0x40 // a short header for no connection
					if kind == 1 {
						n = 20 + n%(statelessResetSize-20)
					} else {
						n = max(n, statelessResetSize+1)
					}
				case 3:
					buf[0] |= 0xc0 // a long header
					binary.BigEndian.PutUint32(buf[1:], 0x0a0a0a0a)
				}
				kinds[kind].Add(1)
				flood.WriteTo(buf[:n], target)
				flooded.Add(1)
			}
		}
	}()

	var got atomic.Int64
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			select {
			case <-tb.concDev.Outbound():
				got.Add(1)
			case <-ctx.Done():
				return
			}
		}
	}()
	payload := make([]byte, 64)
	tick := time.NewTicker(time.Millisecond)
	sent := 0
	for start := time.Now(); time.Since(start) < 3*time.Second; {
		<-tick.C
		for ; sent < int(time.Since(start)/time.Millisecond); sent++ { // 1 kHz, catching up on missed ticks
			binary.BigEndian.PutUint32(payload, uint32(sent))
			tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, payload))
		}
	}
	tick.Stop()
	waitSettled(func() int { return int(got.Load()) }, 200*time.Millisecond)
	cancel()
	<-floodDone
	<-recvDone

	drops := tb.conc.TransportDropCounts()
	lost := sent - int(got.Load())
	t.Logf("flood %d datagrams: transport drops %v; probe sent %d, lost %d (%.3f %%)",
		flooded.Load(), drops, sent, lost, 100*float64(lost)/float64(sent))
	// Every kind is counted by its reason; short headers above
	// statelessResetSize bytes draw a stateless reset (RFC 9000 §10.3),
	// counted on the way out (conc_resets.go).
	for _, c := range []struct {
		reason string
		sent   int64
	}{{"not_quic", kinds[0].Load()}, {"unknown_connection", kinds[1].Load() + kinds[2].Load()}, {"bad_header", kinds[3].Load()}} {
		if got := int64(drops[c.reason] + drops["dos_prevention"]); got < c.sent*99/100 {
			t.Errorf("%s: %d counted of %d sent", c.reason, drops[c.reason], c.sent)
		}
	}
	if float64(lost) > 0.001*float64(sent) && !raceEnabled { // -race slows quic-go several fold
		t.Errorf("probe lost %d of %d during the flood, want ≤ 0.1 %%", lost, sent)
	}
}
