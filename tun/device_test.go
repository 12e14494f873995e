package tun_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/tun"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tun.Config
		want string // "" for a valid config
	}{
		{"zero_value", tun.Config{}, ""},
		{"full", tun.Config{Name: "bond0", MTU: 1280, Addrs: []netip.Prefix{tunAddr4, tunAddr6}, Routes: []netip.Prefix{tunRoute4, tunRoute6}}, ""},
		{"v4_only_small_mtu", tun.Config{MTU: 576, Addrs: []netip.Prefix{tunAddr4}}, ""},
		{"long_name", tun.Config{Name: "a-very-long-name0"}, "longer than 15"},
		{"mtu_low", tun.Config{MTU: 67}, "MTU 67"},
		{"mtu_negative", tun.Config{MTU: -1}, "MTU -1"},
		{"mtu_high", tun.Config{MTU: 65536}, "MTU 65536"},
		{"bad_addr", tun.Config{Addrs: []netip.Prefix{{}}}, "address invalid Prefix"},
		{"v6_small_mtu", tun.Config{MTU: 1200, Addrs: []netip.Prefix{tunAddr6}}, "needs MTU >= 1280"},
		{"v6_route_small_mtu", tun.Config{MTU: 1279, Routes: []netip.Prefix{tunRoute6}}, "needs MTU >= 1280"},
		{"v4_mapped_route", tun.Config{Routes: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}, "route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tun.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v: want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
	// Open checks first and creates nothing for a bad config.
	if _, err := tun.Open(tun.Config{MTU: 1}); !errors.Is(err, tun.ErrInvalidConfig) {
		t.Errorf("Open with MTU 1: %v, want ErrInvalidConfig", err)
	}
}

const testOffset = 16

// tunHost is a TUN opened in a fresh namespace, with a reader goroutine
// that forwards every packet it reads.
type tunHost struct {
	ns     *testbed.NS
	dev    tun.Device
	pkts   chan []byte
	events chan tun.Event
}

var (
	tunAddr4  = netip.MustParsePrefix("10.77.0.1/24")
	tunAddr6  = netip.MustParsePrefix("fd77::1/64")
	tunRoute4 = netip.MustParsePrefix("10.78.0.0/16")
	tunRoute6 = netip.MustParsePrefix("fd78::/64")
	remote4   = netip.MustParseAddr("10.78.0.9")
	remote6   = netip.MustParseAddr("fd78::9")
)

const tunMTU = 1400

func newTunHost(t *testing.T) *tunHost {
	t.Helper()
	if !testbed.IsRoot() {
		t.Skip("skipping: creating a TUN in a network namespace needs root (run as root, as CI does)")
	}
	testkit.CheckLeaks(t)
	testbed.Cleanup("bondd-tuntest-")
	tb := testbed.New("bondd-tuntest-")
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	ns, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	h := &tunHost{ns: ns, pkts: make(chan []byte, 256), events: make(chan tun.Event, 16)}
	err = ns.Do(func() error {
		h.dev, err = tun.Open(tun.Config{
			Name:   "btun0",
			Addrs:  []netip.Prefix{tunAddr4, tunAddr6},
			MTU:    tunMTU,
			Routes: []netip.Prefix{tunRoute4, tunRoute6},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.dev.Close() })
	go tun.DrainEvents(h.dev, func(ev tun.Event) {
		select {
		case h.events <- ev:
		default:
		}
	})
	go func() {
		bufs := make([][]byte, h.dev.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, testOffset+tun.MaxPacketSize)
		}
		sizes := make([]int, len(bufs))
		for {
			n, err := h.dev.Read(bufs, sizes, testOffset)
			for i := range n {
				select {
				case h.pkts <- slices.Clone(bufs[i][testOffset : testOffset+sizes[i]]):
				default: // nobody listening: drop, as a full TUN queue would
				}
			}
			if err != nil && !errors.Is(err, tun.ErrTooManySegments) {
				close(h.pkts)
				return
			}
		}
	}()
	return h
}

// write writes one packet into the TUN at testOffset.
func (h *tunHost) write(t *testing.T, pkt []byte) {
	t.Helper()
	buf := append(make([]byte, testOffset), pkt...)
	n, err := h.dev.Write([][]byte{buf}, testOffset)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n != len(pkt)+tun.MinWriteOffset {
		t.Errorf("Write returned %d, want %d (bytes plus the virtio header)", n, len(pkt)+tun.MinWriteOffset)
	}
}

// next returns the next packet read from the TUN for which match is true,
// skipping others (router solicitations, MLD reports).
func (h *tunHost) next(t *testing.T, match func([]byte) bool) []byte {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, ok := <-h.pkts:
			if !ok {
				t.Fatal("TUN reader stopped")
			}
			if match(p) {
				return p
			}
		case <-timeout:
			t.Fatal("no matching packet read from the TUN within 5s")
		}
	}
}

func dstIs(a netip.Addr, proto byte) func([]byte) bool {
	return func(p []byte) bool {
		if a.Is4() {
			return len(p) >= 20 && p[0]>>4 == 4 && p[9] == proto && netip.AddrFrom4([4]byte(p[16:20])) == a
		}
		return len(p) >= 40 && p[0]>>4 == 6 && p[6] == proto && netip.AddrFrom16([16]byte(p[24:40])) == a
	}
}

func TestOpenConfiguresDevice(t *testing.T) {
	h := newTunHost(t)
	err := h.ns.Do(func() error {
		l, err := netlink.LinkByName("btun0")
		if err != nil {
			return err
		}
		if l.Attrs().MTU != tunMTU || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("link MTU %d flags %v, want %d and up", l.Attrs().MTU, l.Attrs().Flags, tunMTU)
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var have []string
		for _, a := range addrs {
			have = append(have, a.IPNet.String())
		}
		for _, want := range []netip.Prefix{tunAddr4, tunAddr6} {
			if !slices.Contains(have, want.String()) {
				t.Errorf("address %v missing; have %v", want, have)
			}
		}
		for _, want := range []netip.Prefix{tunRoute4, tunRoute6} {
			rs, err := netlink.RouteGet(want.Addr().Next().AsSlice())
			if err != nil {
				return err
			}
			if len(rs) == 0 || rs[0].LinkIndex != l.Attrs().Index {
				t.Errorf("route to %v does not go through btun0", want)
			}
		}
		if mtu, err := h.dev.MTU(); err != nil || mtu != tunMTU {
			t.Errorf("MTU() inside the namespace = %d, %v", mtu, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-h.events:
		if ev&(tun.EventUp|tun.EventMTUUpdate) == 0 {
			t.Errorf("first event %v", ev)
		}
	case <-time.After(3 * time.Second):
		t.Error("no device event within 3s")
	}
	if h.dev.BatchSize() < 1 {
		t.Errorf("BatchSize %d", h.dev.BatchSize())
	}
}

// TestWriteRead writes packets into the TUN and receives them on sockets,
// and sends from sockets and reads them from the TUN, for IPv4 and IPv6.
func TestWriteRead(t *testing.T) {
	h := newTunHost(t)
	for _, fam := range []struct {
		name         string
		local, peer  netip.Addr
		ip           func(src, dst netip.Addr) []byte
		udpOverIP    func(ip any) []byte
		ipProtoField int
	}{
		{name: "ipv4", local: tunAddr4.Addr(), peer: remote4},
		{name: "ipv6", local: tunAddr6.Addr(), peer: remote6},
	} {
		t.Run(fam.name, func(t *testing.T) {
			sock, err := h.ns.ListenUDP(netip.AddrPortFrom(fam.local, 0).String())
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			port := uint16(sock.LocalAddr().(*net.UDPAddr).Port)
			payload := []byte("from the tunnel " + fam.name)

			// TUN -> socket.
			h.write(t, udpPacket(t, netip.AddrPortFrom(fam.peer, 1234), netip.AddrPortFrom(fam.local, port), payload))
			sock.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 2048)
			n, from, err := sock.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("socket did not receive the packet written to the TUN: %v", err)
			}
			if !bytes.Equal(buf[:n], payload) || from != netip.AddrPortFrom(fam.peer, 1234) {
				t.Errorf("received %q from %v", buf[:n], from)
			}

			// socket -> TUN.
			if _, err := sock.WriteToUDPAddrPort([]byte("to the tunnel"), netip.AddrPortFrom(fam.peer, 9)); err != nil {
				t.Fatal(err)
			}
			p := h.next(t, dstIs(fam.peer, 17))
			udp, ok := decode(t, p).Layer(layers.LayerTypeUDP).(*layers.UDP)
			if !ok || string(udp.Payload) != "to the tunnel" || udp.DstPort != 9 {
				t.Errorf("read from TUN: %x", p)
			}
		})
	}
}

// udpPacket builds an IPv4 or IPv6 UDP packet with valid checksums.
func udpPacket(tb testing.TB, src, dst netip.AddrPort, payload []byte) []byte {
	u := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	if src.Addr().Is4() {
		return serialize(tb, ip4(src.Addr(), dst.Addr(), layers.IPProtocolUDP), u, &gopayloadLayer{payload})
	}
	return serialize(tb, ip6(src.Addr(), dst.Addr(), layers.IPProtocolUDP), u, &gopayloadLayer{payload})
}

// TestKernelAcceptsPacketTooBig checks the ICMP replies against the real
// kernel: a socket sends an oversize datagram with DF, the reply built by
// AppendPacketTooBig goes back through the TUN, and the socket's path MTU
// drops to the advertised value.
func TestKernelAcceptsPacketTooBig(t *testing.T) {
	h := newTunHost(t)
	for _, fam := range []struct {
		name      string
		peer      netip.Addr
		mtu       int
		level     int
		discover  int
		doValue   int
		mtuOption int
	}{
		{"ipv4", remote4, 1300, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, unix.IP_MTU},
		{"ipv6", remote6, 1280, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, unix.IPV6_MTU},
	} {
		t.Run(fam.name, func(t *testing.T) {
			var c *net.UDPConn
			err := h.ns.Do(func() error {
				var err error
				c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(fam.peer, 9)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			raw, err := c.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			sockopt := func(set bool) (v int) {
				var serr error
				raw.Control(func(fd uintptr) {
					if set {
						serr = unix.SetsockoptInt(int(fd), fam.level, fam.discover, fam.doValue)
					} else {
						v, serr = unix.GetsockoptInt(int(fd), fam.level, fam.mtuOption)
					}
				})
				if serr != nil {
					t.Fatalf("sockopt: %v", serr)
				}
				return v
			}
			sockopt(true)
			if got := sockopt(false); got != tunMTU {
				t.Fatalf("path MTU before: %d, want %d", got, tunMTU)
			}
			if _, err := c.Write(make([]byte, 1320)); err != nil {
				t.Fatal(err)
			}
			pkt := h.next(t, dstIs(fam.peer, 17))
			reply, ok := tun.AppendPacketTooBig(make([]byte, testOffset, testOffset+tun.MaxPacketTooBigLen), pkt, fam.mtu, netip.Addr{})
			if !ok {
				t.Fatalf("no ICMP reply for %x", pkt[:40])
			}
			if _, err := h.dev.Write([][]byte{reply}, testOffset); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for sockopt(false) != fam.mtu {
				if time.Now().After(deadline) {
					t.Fatalf("path MTU still %d, want %d: kernel ignored the reply", sockopt(false), fam.mtu)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The socket also learns of it: the next oversize send fails.
			if _, err := c.Write(make([]byte, 1320)); !errors.Is(err, syscall.EMSGSIZE) {
				// Linux reports the error on the next send or receive.
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				_, rerr := c.Read(make([]byte, 1))
				t.Logf("send after PTB: %v, read: %v", err, rerr)
			}
		})
	}
}

// TestKernelAcceptsClampedSYNACK clamps the MSS of the kernel's own SYN and
// of a SYN-ACK written back through the TUN: the kernel accepts the SYN-ACK
// only if the incrementally updated checksum is right, and then uses the
// clamped MSS.
func TestKernelAcceptsClampedSYNACK(t *testing.T) {
	h := newTunHost(t)
	for _, fam := range []struct {
		name string
		peer netip.Addr
		ipv6 bool
	}{{"ipv4", remote4, false}, {"ipv6", remote6, true}} {
		t.Run(fam.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			type dialResult struct {
				c   *net.TCPConn
				err error
			}
			done := make(chan dialResult, 1)
			go func() {
				c, err := h.ns.DialTCP(ctx, netip.AddrPortFrom(fam.peer, 80).String())
				done <- dialResult{c, err}
			}()
			syn := h.next(t, dstIs(fam.peer, 6))
			want := tun.MSSForMTU(tunMTU, fam.ipv6)
			off, total, _ := tcpOffset(syn)
			if got := readMSS(syn[off:total]); int(got) != want {
				t.Errorf("kernel SYN MSS %d, want %d", got, want)
			}
			if !tun.ClampMSS(syn, 1100) || readMSS(syn[off:total]) != 1100 || !transportChecksumOK(syn, off, total, 6) {
				t.Errorf("clamping the kernel's SYN failed")
			}

			seg := syn[off:total]
			localAddr := netip.AddrFrom4([4]byte(syn[12:16]))
			if fam.ipv6 {
				localAddr = netip.AddrFrom16([16]byte(syn[8:24]))
			}
			local := netip.AddrPortFrom(localAddr, binary.BigEndian.Uint16(seg[0:2]))
			synack := &layers.TCP{SrcPort: 80, DstPort: layers.TCPPort(local.Port()), Seq: 5000,
				Ack: binary.BigEndian.Uint32(seg[4:8]) + 1, SYN: true, ACK: true, Window: 65535,
				Options: []layers.TCPOption{nop, mssOpt(1460), nop, nop}} // unaligned MSS
			var pkt []byte
			if fam.ipv6 {
				pkt = serialize(t, ip6(fam.peer, local.Addr(), layers.IPProtocolTCP), synack)
			} else {
				pkt = serialize(t, ip4(fam.peer, local.Addr(), layers.IPProtocolTCP), synack)
			}
			if !tun.ClampMSS(pkt, 1000) {
				t.Fatal("SYN-ACK not clamped")
			}
			h.write(t, pkt)
			r := <-done
			if r.err != nil {
				t.Fatalf("handshake with the clamped SYN-ACK failed (kernel dropped it?): %v", r.err)
			}
			defer r.c.Close()
			raw, _ := r.c.SyscallConn()
			var mss int
			raw.Control(func(fd uintptr) { mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
			if mss != 1000 {
				t.Errorf("TCP_MAXSEG %d, want the clamped 1000", mss)
			}
		})
	}
}

// TestOpenFailureClosesDevice makes a configuration step fail and checks
// that the error names it and the device is gone.
func TestOpenFailureClosesDevice(t *testing.T) {
	if !testbed.IsRoot() {
		t.Skip("skipping: creating a TUN in a network namespace needs root (run as root, as CI does)")
	}
	testkit.CheckLeaks(t)
	tb := testbed.New("bondd-tuntest-")
	defer tb.Close()
	ns, err := tb.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	err = ns.Do(func() error {
		dev, err := tun.Open(tun.Config{Name: "bfail0", Addrs: []netip.Prefix{tunAddr4, tunAddr4}})
		if err == nil {
			dev.Close()
			t.Fatal("Open with a duplicate address succeeded")
		}
		if !strings.Contains(err.Error(), "add address") {
			t.Errorf("error %q does not name the step", err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			if _, err := netlink.LinkByName("bfail0"); err != nil {
				return nil // gone
			}
			if time.Now().After(deadline) {
				return errors.New("device still exists after failed Open")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSetMTU lowers and raises the MTU of a live device with SetMTU and
// checks that an MTU out of range is refused without touching it.
func TestSetMTU(t *testing.T) {
	h := newTunHost(t)
	err := h.ns.Do(func() error {
		for _, c := range []struct {
			mtu  int
			ok   bool
			want int
		}{{1280, true, 1280}, {tunMTU, true, tunMTU}, {tun.MinMTU - 1, false, tunMTU}, {tun.MaxPacketSize + 1, false, tunMTU}} {
			err := tun.SetMTU(h.dev, c.mtu)
			if (err == nil) != c.ok || !c.ok && !errors.Is(err, tun.ErrInvalidConfig) {
				t.Errorf("SetMTU(%d): %v, want ok %v", c.mtu, err, c.ok)
			}
			if mtu, err := h.dev.MTU(); err != nil || mtu != c.want {
				t.Errorf("after SetMTU(%d): MTU() = %d, %v; want %d", c.mtu, mtu, err, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
