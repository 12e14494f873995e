package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/policy"
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
func newInprocessBed(sc emu.Scenario, seed uint64, fopts tunnel.FECOptions, picker policy.Picker) (*demoBed, error) {
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*demoBed, error) { cleanup(); return nil, err }

	cert, pin, err := tunnel.SelfSignedCert("concentrator.demo")
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	concDev, edgeDev := tuntest.New(demoMTU, 8), tuntest.New(demoMTU, 8)
	conc, err := tunnel.NewConcentrator(tunnel.ConcentratorOptions{
		Device: concDev, MTU: demoMTU, Conn: pc, TLS: tunnel.ServerTLS(cert, nil), Paths: demoPathOptions, FEC: fopts, Picker: picker,
		Edges: []tunnel.EdgeAuth{{ID: "demo-edge", Token: demoToken, AllowedPrefixes: []netip.Prefix{demoEdgeInner.Masked()}}},
	})
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
			Remote: r.Addr().String(), Labels: p.Labels})
	}
	tlsConf, err := tunnel.ClientTLS("concentrator.demo", nil, pin, nil)
	if err != nil {
		return fail(err)
	}
	edge, err := tunnel.NewEdge(tunnel.EdgeOptions{
		ID: "demo-edge", Device: edgeDev, MTU: demoMTU, Concentrator: concAddr.String(), TLS: tlsConf,
		Token: demoToken, Uplinks: uplinks, Paths: demoPathOptions, FEC: fopts, Picker: picker,
	})
	if err != nil {
		return fail(err)
	}
	edge.Start()
	closers = append(closers, func() { edge.Close() })

	src := netip.AddrPortFrom(demoEdgeInner.Addr(), demoPort)
	dst := netip.AddrPortFrom(demoServerInner.Addr(), demoPort)
	return &demoBed{
		mode: "inprocess",
		edge: edge.Bond(),
		conc: conc.Bond("demo-edge"),
		send: func(payload []byte) error {
			pkt, err := buildUDP4(src, dst, payload)
			if err == nil {
				edgeDev.Inject(pkt)
			}
			return err
		},
		recv: func(ctx context.Context, fs *demoFlow) {
			for {
				select {
				case pkt := <-concDev.Outbound():
					if len(pkt) > 28 {
						fs.record(pkt[28:], time.Now())
					}
				case <-ctx.Done():
					return
				}
			}
		},
		close: cleanup,
	}, nil
}

// buildUDP4 serialises an IPv4/UDP packet with valid checksums.
func buildUDP4(src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
		SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, err
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload(payload))
	return buf.Bytes(), err
}
