package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/tun/tuntest"
	"github.com/bondd/bondd/tunnel"
)

// Addresses of the demo's inner network, the same in both modes.
var (
	demoEdgeInner   = netip.MustParsePrefix("10.77.0.2/24")
	demoServerInner = netip.MustParsePrefix("10.78.0.1/24")
	demoToken       = []byte("demo-token-not-a-secret")
)

// demoMTU is the inner MTU bondd derives for its default QUIC packet size.
var demoMTU = tunnel.MTUFor(tunnel.DefaultInitialPacketSize)

// demoPathOptions shortens the timers so a path that dies in the demo is
// noticed and redialled within a couple of seconds.
var demoPathOptions = tunnel.PathOptions{IdleTimeout: 3 * time.Second, RedialMax: 2 * time.Second}

// newInprocessBed runs the edge, the concentrator and one emu relay per path
// in this process, over loopback UDP, with in-memory TUN devices.
func newInprocessBed(o BedOptions) (*Bed, error) {
	sc, seed, fopts, picker := o.Scenario, o.Seed, o.FEC, o.Picker
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*Bed, error) { cleanup(); return nil, err }

	cert, pin, err := tunnel.SelfSignedCert("concentrator.demo")
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	concDev, edgeDev := tuntest.New(demoMTU, 8), tuntest.New(demoMTU, 8)
	co := tunnel.ConcentratorOptions{
		Device: concDev, MTU: demoMTU, Conn: pc, TLS: tunnel.ServerTLS(cert, nil), Paths: demoPathOptions, FEC: fopts, Picker: picker,
		Edges: []tunnel.EdgeAuth{{ID: "demo-edge", Token: demoToken, AllowedPrefixes: []netip.Prefix{demoEdgeInner.Masked()}}},
	}
	err = applyRateControl(o.RateControl, nil, &co)
	var conc *tunnel.Concentrator
	if err == nil {
		conc, err = tunnel.NewConcentrator(co)
	}
	if err != nil {
		pc.Close()
		return nil, err
	}
	if err := conc.Start(); err != nil {
		return nil, err
	}
	closers = append(closers, func() { conc.Close() })
	concAddr := netip.MustParseAddrPort(pc.LocalAddr().String())

	var uplinks []tunnel.UplinkOptions
	created := time.Now()
	for i, p := range sc.Paths {
		l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return fail(err)
		}
		r, err := emu.NewRelay(emu.Options{Listen: l, Upstream: concAddr, Up: p.Up, Down: p.Down, Seed: seed + uint64(i)})
		if err != nil {
			l.Close()
			return fail(fmt.Errorf("path %s: %w", p.Name, err))
		}
		closers = append(closers, func() { r.Close() })
		uplinks = append(uplinks, tunnel.UplinkOptions{Name: p.Name, Bind: netip.MustParseAddr("127.0.0.1"),
			Remote: r.Addr().String(), Labels: p.Labels, LEOReconf: o.LEO[p.Name], Lanes: o.Lanes})
	}
	tlsConf, err := tunnel.ClientTLS("concentrator.demo", nil, pin, nil)
	if err != nil {
		return fail(err)
	}
	eo := tunnel.EdgeOptions{
		ID: "demo-edge", Device: edgeDev, MTU: demoMTU, Concentrator: concAddr.String(), TLS: tlsConf,
		Token: demoToken, Uplinks: uplinks, Paths: demoPathOptions, FEC: fopts, Picker: picker,
		Rules: o.Rules, Classify: o.Classify,
	}
	err = applyRateControl(o.RateControl, &eo, nil)
	var edge *tunnel.Edge
	if err == nil {
		edge, err = tunnel.NewEdge(eo)
	}
	if err != nil {
		return fail(err)
	}
	edge.Start()
	closers = append(closers, func() { edge.Close() })

	src := netip.AddrPortFrom(demoEdgeInner.Addr(), demoPort)
	dst := netip.AddrPortFrom(demoServerInner.Addr(), demoPort)
	var pkt []byte // reused: Inject copies
	return &Bed{
		Mode:    "inprocess",
		Edge:    edge.Bond(),
		Conc:    conc.Bond("demo-edge"),
		Created: created,
		Send: func(payload []byte) error {
			var err error
			if pkt, err = AppendUDP4(pkt[:0], src, dst, payload); err != nil {
				return err
			}
			return edgeDev.Inject(pkt)
		},
		Recv: func(ctx context.Context, deliver func([]byte, time.Time)) {
			for {
				select {
				case pkt := <-concDev.Outbound():
					if len(pkt) >= 20 && pkt[0]>>4 == 4 {
						if h := int(pkt[0]&0x0f) * 4; len(pkt) >= h+8 {
							deliver(pkt[h+8:], time.Now())
						}
					}
				case <-ctx.Done():
					return
				}
			}
		},
		Close: cleanup,
	}, nil
}

// AppendUDP4 appends an IPv4/UDP packet (no IP options, DF set, TTL 64)
// carrying payload from src to dst, with valid header and UDP checksums
// (RFC 791, RFC 768), to b and returns it. It does not allocate when b has
// room for 28 + len(payload) bytes. Both addresses must be IPv4.
func AppendUDP4(b []byte, src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	if !src.Addr().Is4() || !dst.Addr().Is4() {
		return b, fmt.Errorf("AppendUDP4: %s → %s is not IPv4", src, dst)
	}
	total := 28 + len(payload)
	if total > 0xffff {
		return b, fmt.Errorf("AppendUDP4: %d-byte packet is too long", total)
	}
	start := len(b)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	b = append(b, 0x45, 0, byte(total>>8), byte(total), 0, 0, 0x40, 0, 64, 17, 0, 0)
	b = append(b, s4[:]...)
	b = append(b, d4[:]...)
	ulen := 8 + len(payload)
	b = append(b, byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()), byte(ulen>>8), byte(ulen), 0, 0)
	b = append(b, payload...)
	ip, udp := b[start:start+20], b[start+20:]
	binary.BigEndian.PutUint16(ip[10:], ^foldSum(sum16(ip, 0)))
	// UDP checksum over the pseudo-header (addresses, protocol, length)
	// and the datagram; 0 is sent as 0xffff (RFC 768).
	ps := sum16(s4[:], 0)
	ps = sum16(d4[:], ps)
	ps += 17 + uint32(ulen)
	c := ^foldSum(sum16(udp, ps))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return b, nil
}

// sum16 adds b as big-endian 16-bit words (the last byte padded with zero)
// to acc: the one's-complement sum of RFC 1071 before folding.
func sum16(b []byte, acc uint32) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		acc += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// foldSum folds a 32-bit one's-complement sum into 16 bits.
func foldSum(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
