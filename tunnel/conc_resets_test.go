package tunnel

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go"
)

// resetOf returns a datagram of n bytes with first byte b0.
func resetOf(n int, b0 byte) []byte {
	b := make([]byte, n)
	b[0] = b0
	return b
}

func TestResetCounterWrote(t *testing.T) {
	peer := netip.MustParseAddrPort("192.0.2.1:4000")
	migrated := netip.MustParseAddrPort("192.0.2.9:4001")
	hostile := netip.MustParseAddrPort("198.51.100.7:53")
	for _, tc := range []struct {
		name string
		b    []byte
		to   netip.AddrPort
		want uint64
	}{
		{"a reset to an address of no connection", resetOf(statelessResetSize, 0x5f), hostile, 1},
		{"a reset to an IPv4-mapped address of no connection", resetOf(statelessResetSize, 0x40), netip.MustParseAddrPort("[::ffff:198.51.100.7]:53"), 1},
		{"a connection's packet of the same shape", resetOf(statelessResetSize, 0x5f), peer, 0},
		{"a connection's packet, IPv4-mapped", resetOf(statelessResetSize, 0x5f), netip.MustParseAddrPort("[::ffff:192.0.2.1]:4000"), 0},
		{"a packet to a peer that migrated", resetOf(statelessResetSize, 0x5f), migrated, 0},
		{"one byte shorter", resetOf(statelessResetSize-1, 0x5f), hostile, 0},
		{"one byte longer", resetOf(statelessResetSize+1, 0x5f), hostile, 0},
		{"a long header", resetOf(statelessResetSize, 0xc0), hostile, 0},
		{"fixed bit clear", resetOf(statelessResetSize, 0x00), hostile, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Uint64
			live, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := newResetCounter(func() { n.Add(1) }, func(a netip.AddrPort) context.Context {
				if a == migrated {
					return live
				}
				return nil
			})
			r.addPeer(peer, live)
			r.wrote(tc.b, tc.to)
			if got := n.Load(); got != tc.want {
				t.Errorf("counted %d, want %d", got, tc.want)
			}
		})
	}
}

// TestResetCounterLookups: a flood of resets to one address costs one
// scan of the bonds a missCacheFor; a migrated peer is scanned for once.
func TestResetCounterLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostile := netip.MustParseAddrPort("198.51.100.7:53")
		migrated := netip.MustParseAddrPort("192.0.2.9:4001")
		var n, lookups atomic.Uint64
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newResetCounter(func() { n.Add(1) }, func(a netip.AddrPort) context.Context {
			lookups.Add(1)
			if a == migrated {
				return ctx
			}
			return nil
		})
		b := resetOf(statelessResetSize, 0x40)
		for range 1000 {
			r.wrote(b, hostile)
			r.wrote(b, migrated)
		}
		if n.Load() != 1000 || lookups.Load() != 2 {
			t.Errorf("counted %d with %d lookups, want 1000 with 2", n.Load(), lookups.Load())
		}
		time.Sleep(missCacheFor)
		r.wrote(b, hostile)
		if n.Load() != 1001 || lookups.Load() != 3 {
			t.Errorf("after %s: counted %d with %d lookups, want 1001 with 3", missCacheFor, n.Load(), lookups.Load())
		}
	})
}

// TestResetCounterScansBounded: resets to many addresses at once (a crowd
// redialling, a spoofed flood) scan the bonds at most maxScansBurst times
// at once and maxScansPerS a second, and every one of them counts.
func TestResetCounterScansBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n, lookups atomic.Uint64
		r := newResetCounter(func() { n.Add(1) }, func(netip.AddrPort) context.Context {
			lookups.Add(1)
			return nil
		})
		b := resetOf(statelessResetSize, 0x40)
		to := func(i int) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), 4000)
		}
		for i := range 1000 {
			r.wrote(b, to(i))
		}
		if n.Load() != 1000 || lookups.Load() != maxScansBurst {
			t.Fatalf("1000 addresses at once: counted %d with %d scans, want 1000 with %d", n.Load(), lookups.Load(), maxScansBurst)
		}
		time.Sleep(time.Second)
		for i := range 1000 {
			r.wrote(b, to(1000+i))
		}
		if want := uint64(maxScansBurst + maxScansPerS); n.Load() != 2000 || lookups.Load() != want {
			t.Errorf("1000 more a second later: counted %d with %d scans, want 2000 with %d", n.Load(), lookups.Load(), want)
		}
	})
}

// TestResetCounterPeerEnds: an address stays a peer's for peerGrace after
// its connection ended (quic-go answers late packets with its
// CONNECTION_CLOSE), then counts.
func TestResetCounterPeerEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peer := netip.MustParseAddrPort("192.0.2.1:4000")
		var n atomic.Uint64
		r := newResetCounter(func() { n.Add(1) }, func(netip.AddrPort) context.Context { return nil })
		ctx, cancel := context.WithCancel(context.Background())
		r.addPeer(peer, ctx)
		r.addPeer(peer, context.Background()) // a second connection from there, alive
		b := resetOf(statelessResetSize, 0x40)
		cancel()
		time.Sleep(peerGrace + time.Second)
		synctest.Wait()
		r.wrote(b, peer)
		if n.Load() != 0 {
			t.Fatalf("counted %d with a connection alive at the address, want 0", n.Load())
		}
		r2 := newResetCounter(func() { n.Add(1) }, func(netip.AddrPort) context.Context { return nil })
		ctx2, cancel2 := context.WithCancel(context.Background())
		r2.addPeer(peer, ctx2)
		cancel2()
		time.Sleep(peerGrace - time.Second)
		r2.wrote(b, peer)
		if n.Load() != 0 {
			t.Fatalf("counted %d within peerGrace of the end, want 0", n.Load())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		r2.wrote(b, peer)
		if n.Load() != 1 {
			t.Errorf("counted %d after peerGrace, want 1", n.Load())
		}
	})
}

func TestResetCounterAllocs(t *testing.T) {
	peer := netip.MustParseAddrPort("192.0.2.1:4000")
	r := newResetCounter(func() {}, func(netip.AddrPort) context.Context { return nil })
	r.addPeer(peer, context.Background())
	data, reset := resetOf(1200, 0x40), resetOf(statelessResetSize, 0x40)
	hostile := netip.MustParseAddrPort("198.51.100.7:53")
	i := 0
	if a := testing.AllocsPerRun(100, func() {
		r.wrote(data, peer)
		r.wrote(reset, peer)
		r.wrote(reset, hostile) // scanned for, then cached
		i++
		r.wrote(reset, netip.AddrPortFrom(hostile.Addr(), uint16(i))) // a new address each time: scanned, then past the scan bound
	}); a != 0 {
		t.Errorf("wrote allocates %.1f times per packet, want 0", a)
	}
}

// TestCountResetsKeepsSocket: the concentrator's *net.UDPConn is wrapped
// so that quic-go still sees a UDP socket (checked at compile time in
// conc_resets.go); other sockets are left alone; a PacketConn that is no
// socket is wrapped.
func TestCountResetsKeepsSocket(t *testing.T) {
	r := newResetCounter(func() {}, func(netip.AddrPort) context.Context { return nil })
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	if _, ok := countResets(udp, r).(*resetCountingUDPConn); !ok {
		t.Error("a *net.UDPConn is not wrapped as a resetCountingUDPConn")
	}
	unix, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "@bondd-resets-test", Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	if pc := countResets(unix, r); pc != net.PacketConn(unix) {
		t.Errorf("another socket is wrapped as %T", pc)
	}
	if _, ok := countResets(struct{ net.PacketConn }{udp}, r).(*resetCountingPacketConn); !ok {
		t.Error("a PacketConn that is no socket is not wrapped")
	}
}

// TestStatelessResetsCounted: short-header packets of no connection above
// the stateless-reset size, which quic-go answers with a reset, count as
// unknown_connection, while a bond's own traffic counts nothing.
func TestStatelessResetsCounted(t *testing.T) {
	tb := newTestBondWith(t, token, 1, func(o *EdgeOptions) { o.FEC = FECOptions{Mode: FECOff} })
	tb.waitActive(t, 1)
	var got atomic.Int64
	go func() {
		for {
			select {
			case <-tb.concDev.Outbound():
				got.Add(1)
			case <-tb.concDev.Done():
				return
			}
		}
	}()
	for i := range 200 { // the bond's own traffic, of every small size: no count
		tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, make([]byte, i%100)))
	}
	waitSettled(func() int { return int(got.Load()) }, 100*time.Millisecond)
	if got.Load() == 0 {
		t.Fatal("the bond carried nothing")
	}
	if n := tb.conc.TransportDropCounts()["unknown_connection"]; n != 0 {
		t.Fatalf("unknown_connection %d after the bond's own traffic, want 0", n)
	}

	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 50
	b := make([]byte, 100)
	for i := range sent {
		b[0], b[1] = 0x40, byte(i) // a short header; connection ID of no connection
		if _, err := c.WriteTo(b, tb.conc.opts.Conn.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // quic-go sends at most 4 resets at a time and drops (and counts) the rest
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := c.ReadFrom(make([]byte, 1500))
	if err != nil || n != statelessResetSize {
		t.Errorf("read %d bytes (err %v), want a %d-byte stateless reset", n, err, statelessResetSize)
	}
	deadline := time.Now().Add(3 * time.Second)
	for tb.conc.TransportDropCounts()["unknown_connection"] < sent && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := tb.conc.TransportDropCounts(); got["unknown_connection"] != sent {
		t.Errorf("transport drops %v, want unknown_connection %d", got, sent)
	}
}

// concPathConn returns a path of the test bond's concentrator side with a
// live connection, and that connection.
func concPathConn(t *testing.T, tb *testBond) (*path, *quic.Conn) {
	t.Helper()
	b := tb.conc.Bond("van-1")
	if b == nil {
		t.Fatal("no bond van-1 on the concentrator")
	}
	for _, p := range b.paths.Load().paths {
		if c := p.pc.conn.Load(); c != nil {
			return p, c
		}
	}
	t.Fatal("no live path connection on the concentrator")
	return nil, nil
}

// TestPeerConn: the scan for a migrated peer finds a live connection of
// a bond by its peer's address, and nothing at another address.
func TestPeerConn(t *testing.T) {
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	_, c := concPathConn(t, tb)
	peer := udpAddrPort(c.RemoteAddr())
	if tb.conc.peerConn(peer) == nil {
		t.Errorf("peerConn(%s) found no connection, want the path's", peer)
	}
	if other := netip.AddrPortFrom(peer.Addr(), peer.Port()^1); tb.conc.peerConn(other) != nil {
		t.Errorf("peerConn(%s) found a connection, want none", other)
	}
}

// TestPeerMovedMakesAPeer: a path connection whose peer address changed
// (checkPeer) makes the new address a peer's for the reset count, so its
// packets need no scan.
func TestPeerMovedMakesAPeer(t *testing.T) {
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	p, c := concPathConn(t, tb)
	r := tb.conc.tdrops.resets
	addr := unmapAddrPort(udpAddrPort(c.RemoteAddr()))
	r.mu.Lock()
	delete(r.peers, addr) // as if the peer had moved here after its connection started
	r.mu.Unlock()
	last := "192.0.2.1:1" // the address before the move
	p.checkPeer(c, &last)
	r.mu.RLock()
	n := r.peers[addr]
	r.mu.RUnlock()
	if n != 1 {
		t.Errorf("after the move to %s: %d connections at it in the reset count, want 1", addr, n)
	}
}
