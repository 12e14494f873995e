package tunnel

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tun/tuntest"
)

// testBond is an edge and a concentrator joined over loopback UDP, each with
// an in-memory TUN.
type testBond struct {
	edge    *Edge
	conc    *Concentrator
	edgeTun tun.Device
	concTun tun.Device
	edgeDev *tuntest.Device // edgeTun, when it is a tuntest.Device
	concDev *tuntest.Device

	mu    sync.Mutex
	socks map[string]net.PacketConn // the current socket of each uplink
}

var (
	edgeAddr = netip.MustParseAddrPort("10.77.0.2:5000")
	srvAddr  = netip.MustParseAddrPort("10.78.0.1:6000")
	token    = []byte("0123456789abcdef-token")
)

const testMTU = 1200

func newTestBond(t testing.TB, edgeToken []byte, uplinks int) *testBond {
	t.Helper()
	return newTestBondWith(t, edgeToken, uplinks, nil)
}

// newTestBondWith is newTestBond with a hook that edits the edge's options.
func newTestBondWith(t testing.TB, edgeToken []byte, uplinks int, edit func(*EdgeOptions)) *testBond {
	t.Helper()
	tb := newTestBondDevices(t, edgeToken, uplinks, tuntest.New(testMTU, 8), tuntest.New(testMTU, 8), edit)
	tb.edgeDev, tb.concDev = tb.edgeTun.(*tuntest.Device), tb.concTun.(*tuntest.Device)
	return tb
}

// newTestBondDevices is newTestBond with the TUN devices supplied.
func newTestBondDevices(t testing.TB, edgeToken []byte, uplinks int, edgeTun, concTun tun.Device, edit func(*EdgeOptions)) *testBond {
	t.Helper()
	tb := &testBond{edgeTun: edgeTun, concTun: concTun, socks: map[string]net.PacketConn{}}
	popts := PathOptions{IdleTimeout: 2 * time.Second, Keepalive: 300 * time.Millisecond, RedialMin: 50 * time.Millisecond, RedialMax: 200 * time.Millisecond,
		SuspectMin: testSuspectMin}
	var concAddr string
	var tlsConf *tls.Config
	tb.conc, concAddr, tlsConf = startTestConcentrator(t, concTun, popts,
		EdgeAuth{ID: "van-1", Token: token, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}})
	var ups []UplinkOptions
	for i := range uplinks {
		ups = append(ups, UplinkOptions{Name: fmt.Sprintf("up%d", i), Bind: netip.MustParseAddr("127.0.0.1"),
			Labels: map[string]string{"link_type": "cellular"}})
	}
	eo := EdgeOptions{
		ID: "van-1", Device: edgeTun, MTU: testMTU, Concentrator: concAddr, TLS: tlsConf,
		Token: edgeToken, Uplinks: ups, Paths: popts,
		Listen: func(ctx context.Context, u UplinkOptions) (net.PacketConn, error) {
			c, err := ListenUplink(ctx, u)
			if err == nil {
				tb.mu.Lock()
				tb.socks[u.Name] = c
				tb.mu.Unlock()
			}
			return c, err
		},
	}
	if edit != nil {
		edit(&eo)
	}
	var err error
	if tb.edge, err = NewEdge(eo); err != nil {
		t.Fatal(err)
	}
	tb.edge.Start()
	t.Cleanup(func() { tb.edge.Close() })
	return tb
}

// startTestConcentrator starts a concentrator for the one edge ea on a
// loopback UDP socket, with a fresh self-signed certificate for
// "concentrator.test", TUN dev and path options popts, and closes it at
// cleanup. It returns the concentrator, its address and the edge's TLS
// config, which pins the certificate. mods change the options before the
// concentrator is made.
func startTestConcentrator(t testing.TB, dev tun.Device, popts PathOptions, ea EdgeAuth, mods ...func(*ConcentratorOptions)) (*Concentrator, string, *tls.Config) {
	t.Helper()
	cert, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	co := ConcentratorOptions{Device: dev, MTU: testMTU, Conn: pc, TLS: ServerTLS(cert, nil), Paths: popts, Edges: []EdgeAuth{ea}}
	for _, m := range mods {
		m(&co)
	}
	conc, err := NewConcentrator(co)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	if err := conc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conc.Close() })
	tlsConf, err := ClientTLS("concentrator.test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conc, pc.LocalAddr().String(), tlsConf
}

// waitActive waits until n edge paths are ACTIVE.
func (tb *testBond) waitActive(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		active := 0
		for _, p := range tb.edge.Bond().Stats().Paths {
			if p.Status == policy.StatusActive.String() {
				active++
			}
		}
		if active == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("paths not active: %+v", tb.edge.Bond().Stats().Paths)
}

// exchange sends count packets into from and expects them, intact, out of to.
func (tb *testBond) exchange(t *testing.T, from, to *tuntest.Device, src, dst netip.AddrPort, count int) {
	t.Helper()
	if lost := tb.exchangeLossy(t, from, to, src, dst, count, 10*time.Second); lost > 0 {
		t.Fatalf("%d of %d packets did not arrive\nedge: %+v\nconcentrator: %+v", lost, count,
			tb.edge.Bond().Stats(), tb.conc.Bond("van-1").Stats())
	}
}

// exchangeLossy sends count packets into from, checks that what comes out of
// to is intact and unduplicated, and returns how many did not arrive within
// wait.
func (tb *testBond) exchangeLossy(t *testing.T, from, to *tuntest.Device, src, dst netip.AddrPort, count int, wait time.Duration) int {
	t.Helper()
	// Flow control like an application's: at most exchangeWindow packets
	// outstanding. quic-go's 128-datagram receive queue drops what a
	// receiver slowed down (by the race detector, by a loaded machine)
	// cannot take, and a test must not depend on the machine's speed.
	const exchangeWindow = 32
	want := map[string]bool{}
	pkts := make([][]byte, count)
	for i := range pkts {
		pkts[i] = udp4(src, dst, fmt.Appendf(nil, "packet %d %s", i, strings.Repeat("x", i%900)))
		want[string(pkts[i])] = true
	}
	sent, got, credit := 0, 0, 0
	timeout := time.After(wait)
	for sent < count {
		for sent < count && sent-(got+credit) < exchangeWindow {
			from.Inject(pkts[sent])
			sent++
		}
		if sent == count {
			break
		}
		select {
		case pkt := <-to.Outbound():
			if !want[string(pkt)] {
				t.Fatalf("unexpected or duplicate packet of %d bytes", len(pkt))
			}
			delete(want, string(pkt))
			got++
		case <-time.After(100 * time.Millisecond):
			credit++ // nothing for a while: a packet was lost; let the window move on
		case <-timeout:
			return len(want)
		}
	}
	// Everything is sent: collect the rest.
	for len(want) > 0 {
		select {
		case pkt := <-to.Outbound():
			if !want[string(pkt)] {
				t.Fatalf("unexpected or duplicate packet of %d bytes", len(pkt))
			}
			delete(want, string(pkt))
		case <-timeout:
			return len(want)
		}
	}
	return 0
}

func TestBondBothWays(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 3)
	tb.waitActive(t, 3)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 500)
	tb.exchange(t, tb.concDev, tb.edgeDev, srvAddr, edgeAddr, 500)

	cs := tb.conc.Bond("van-1").Stats()
	if len(cs.Paths) != 3 || cs.RxPackets != 500 || cs.TxPackets != 500 {
		t.Fatalf("concentrator stats: %+v", cs)
	}
	for _, p := range cs.Paths {
		if p.Labels["link_type"] != "cellular" {
			t.Fatalf("labels not carried by the hello: %+v", p)
		}
	}

	// A packet for an address no edge owns is dropped and counted.
	tb.concDev.Inject(udp4(srvAddr, netip.MustParseAddrPort("192.0.2.1:9"), []byte("lost")))
	waitFor(t, func() bool { return tb.conc.NoRoute() == 1 })
}

func TestBondSpoofedSource(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	tb.edgeDev.Inject(udp4(netip.MustParseAddrPort("10.99.0.5:1"), srvAddr, []byte("spoofed")))
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 1)
	if d := tb.conc.Bond("van-1").Stats().Drops; d[DropSpoofed] != 1 {
		t.Fatalf("spoofed drops = %d, want 1 (%+v)", d[DropSpoofed], d)
	}
	select {
	case pkt := <-tb.concDev.Outbound():
		t.Fatalf("spoofed packet delivered: %x", pkt)
	default:
	}
}

func TestBondWrongToken(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, []byte("wrong-token-0123456789"), 1)
	waitFor(t, func() bool {
		p := tb.edge.Bond().Stats().Paths[0]
		return p.LastError == ErrUnauthorized.Error()
	})
	if tb.conc.AuthFailures() == 0 {
		t.Fatal("concentrator did not count the refusal")
	}
	if s := tb.edge.Bond().Stats().Paths[0].Status; s != "UNAVAILABLE" {
		t.Fatalf("refused path is %s", s)
	}
}

// TestBondPathLoss kills each uplink's socket in turn while traffic flows:
// the bond carries on over the other path, and the dead path comes back by
// redialling. Packets already handed to the dying QUIC connection (at most
// its 32-datagram send queue plus a congestion window) may be lost; nothing
// queued in bondd is.
func TestBondPathLoss(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 2)
	tb.waitActive(t, 2)
	for _, name := range []string{"up0", "up1"} {
		tb.mu.Lock()
		tb.socks[name].Close()
		tb.mu.Unlock()
		if lost := tb.exchangeLossy(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 200, 5*time.Second); lost > 64 {
			t.Fatalf("after closing %s: %d of 200 packets lost", name, lost)
		}
		tb.waitActive(t, 2) // redialled
		tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 200)
	}
}

// TestConcentratorPathLastError checks that the concentrator records why
// an edge's connection ended: an edge that shuts down closes its paths
// with "shutting down", and the node's path says so once it is down.
func TestConcentratorPathLastError(t *testing.T) {
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	cb := tb.conc.Bond("van-1")
	if e := cb.Stats().Paths[0].LastError; e != "" {
		t.Fatalf("path up on its first connection has last error %q, want none", e)
	}
	tb.edge.Close()
	waitFor(t, func() bool { return cb.PathsUp() == 0 })
	waitFor(t, func() bool { return cb.Stats().Paths[0].LastError != "" })
	if e := cb.Stats().Paths[0].LastError; !strings.Contains(e, "shutting down") {
		t.Errorf("concentrator path's last error %q, want the edge's close reason (shutting down)", e)
	}
}

func TestBondOversize(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	big := udp4(edgeAddr, srvAddr, make([]byte, testMTU))
	tb.edgeDev.Inject(big)
	select {
	case reply := <-tb.edgeDev.Outbound():
		// ICMP fragmentation needed back to the sender, next-hop MTU testMTU.
		if reply[9] != 1 || reply[20] != 3 || reply[21] != 4 || int(reply[26])<<8|int(reply[27]) != testMTU {
			t.Fatalf("reply is not ICMP frag-needed with MTU %d: %x", testMTU, reply[:28])
		}
		if !bytes.Equal(reply[16:20], big[12:16]) {
			t.Fatal("reply not addressed to the sender")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ICMP reply for an oversize packet")
	}
	// The reply is written before it is counted: wait for the count.
	waitFor(t, func() bool { return tb.edge.Bond().Stats().ICMPSent == 1 })
	if s := tb.edge.Bond().Stats(); s.Drops[DropOversize] != 1 || s.ICMPSent != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, "the condition", 10*time.Second, cond)
}

// waitSettled waits until count stops growing: it has not changed for
// quiet (longer than the time a packet still on its way can take), or
// 10 s have passed. It is how a test drains what is in flight on a lossy
// path, where the final count is not known in advance, without a fixed
// wait that a slow machine (the race detector) outruns.
func waitSettled(count func() int, quiet time.Duration) {
	deadline := time.Now().Add(10 * time.Second)
	last, since := count(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// TestBondClampsMSS sends a TCP SYN advertising MSS 1460 into each end: it
// leaves the other end with the MSS clamped to what the tunnel MTU carries,
// and a valid checksum.
func TestBondClampsMSS(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	for _, dir := range []struct {
		from, to *tuntest.Device
		src, dst netip.AddrPort
	}{
		{tb.edgeDev, tb.concDev, edgeAddr, srvAddr},
		{tb.concDev, tb.edgeDev, srvAddr, edgeAddr},
	} {
		dir.from.Inject(tcpSYN4(dir.src, dir.dst, 1460))
		select {
		case pkt := <-dir.to.Outbound():
			mss := int(pkt[20+22])<<8 | int(pkt[20+23])
			if want := testMTU - 40; mss != want {
				t.Fatalf("MSS %d after the tunnel, want %d", mss, want)
			}
			if c := fold(sum(sum(0, pkt[12:20])+6+uint64(len(pkt)-20), pkt[20:])); c != 0xffff {
				t.Fatalf("TCP checksum invalid after clamping: %#x", c)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SYN did not cross the tunnel")
		}
	}
}

// tcpSYN4 builds an IPv4 TCP SYN with one option, MSS mss, and valid checksums.
func tcpSYN4(src, dst netip.AddrPort, mss uint16) []byte {
	pkt := make([]byte, 44)
	pkt[0], pkt[8], pkt[9] = 0x45, 64, 6
	pkt[2], pkt[3] = 0, 44
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(pkt[12:], s[:])
	copy(pkt[16:], d[:])
	tcp := pkt[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port())
	tcp[12] = 6 << 4 // data offset: 24 bytes
	tcp[13] = 0x02   // SYN
	tcp[14], tcp[15] = 0xff, 0xff
	tcp[20], tcp[21], tcp[22], tcp[23] = 2, 4, byte(mss>>8), byte(mss)
	c := ^fold(sum(0, pkt[:20]))
	pkt[10], pkt[11] = byte(c>>8), byte(c)
	c = ^fold(sum(sum(0, pkt[12:20])+6+24, tcp))
	tcp[16], tcp[17] = byte(c>>8), byte(c)
	return pkt
}

// TestBondClientCertificate authenticates the edge by mutual TLS: the
// concentrator accepts the certificate whose CommonName it expects and
// refuses one with another name.
func TestBondClientCertificate(t *testing.T) {
	testkit.CheckLeaks(t)
	for _, tc := range []struct {
		cn string
		ok bool
	}{{"van-1", true}, {"van-2", false}} {
		t.Run(tc.cn, func(t *testing.T) {
			srvCert, pin, err := SelfSignedCert("concentrator.test")
			if err != nil {
				t.Fatal(err)
			}
			edgeCert, _, err := SelfSignedCert(tc.cn)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := x509.ParseCertificate(edgeCert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			cas := x509.NewCertPool()
			cas.AddCert(leaf)
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			concDev, edgeDev := tuntest.New(testMTU, 8), tuntest.New(testMTU, 8)
			conc, err := NewConcentrator(ConcentratorOptions{Device: concDev, MTU: testMTU, Conn: pc, TLS: ServerTLS(srvCert, cas),
				Edges: []EdgeAuth{{ID: "van-1", CertCN: "van-1", AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := conc.Start(); err != nil {
				t.Fatal(err)
			}
			defer conc.Close()
			tlsConf, err := ClientTLS("concentrator.test", nil, pin, &edgeCert)
			if err != nil {
				t.Fatal(err)
			}
			edge, err := NewEdge(EdgeOptions{ID: "van-1", Device: edgeDev, MTU: testMTU, Concentrator: pc.LocalAddr().String(),
				TLS: tlsConf, Uplinks: []UplinkOptions{{Name: "up0", Bind: netip.MustParseAddr("127.0.0.1")}}})
			if err != nil {
				t.Fatal(err)
			}
			edge.Start()
			defer edge.Close()
			waitFor(t, func() bool {
				p := edge.Bond().Stats().Paths[0]
				return p.Status == "ACTIVE" || p.LastError != ""
			})
			if got := edge.Bond().Stats().Paths[0].Status == "ACTIVE"; got != tc.ok {
				t.Fatalf("path active = %v, want %v (%+v)", got, tc.ok, edge.Bond().Stats().Paths[0])
			}
			if !tc.ok && conc.AuthFailures() == 0 {
				t.Fatal("refusal not counted")
			}
		})
	}
}

// TestEdgeCloseWhileDialling closes edges at moments spread over their
// dial and hello: Close must return promptly every time, even when a
// connection comes up after it started.
func TestEdgeCloseWhileDialling(t *testing.T) {
	testkit.CheckLeaks(t)
	for _, after := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		tb := newTestBond(t, token, 3)
		time.Sleep(after)
		done := make(chan struct{})
		go func() { tb.edge.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("Edge.Close after %v hangs\n%s", after, buf[:runtime.Stack(buf, true)])
		}
	}
}

// TestBondLinkLocal checks that link-scope traffic (here mDNS to
// 224.0.0.251) is not sent through the tunnel, and is counted.
func TestBondLinkLocal(t *testing.T) {
	testkit.CheckLeaks(t)
	tb := newTestBond(t, token, 1)
	tb.waitActive(t, 1)
	tb.edgeDev.Inject(udp4(edgeAddr, netip.MustParseAddrPort("224.0.0.251:5353"), []byte("mdns")))
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 1) // ordinary traffic still flows
	if d := tb.edge.Bond().Stats().Drops; d[DropLinkLocal] != 1 {
		t.Fatalf("link_local drops %d, want 1", d[DropLinkLocal])
	}
	if tx := tb.edge.Bond().Stats().TxPackets; tx != 1 {
		t.Fatalf("%d packets sent into the tunnel, want only the ordinary one", tx)
	}
}
