package demo

import (
	"context"
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
	conc, err := startConcentrator(o, concDev, pc, cert)
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { conc.Close() })
	concAddr := netip.MustParseAddrPort(pc.LocalAddr().String())

	links := make([]emu.RelayLink, len(sc.Paths))
	for i, p := range sc.Paths {
		links[i] = emu.RelayLink{Up: p.Up, Down: p.Down}
	}
	created := time.Now()
	relays, err := emu.StartRelays(concAddr, links, seed)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { relays.Close() })
	uplinks := make([]tunnel.UplinkOptions, len(sc.Paths))
	for i, p := range sc.Paths {
		uplinks[i] = tunnel.UplinkOptions{Name: p.Name, Bind: netip.MustParseAddr("127.0.0.1"),
			Remote: relays[i].Addr().String(), Labels: p.Labels, LEOReconf: o.LEO[p.Name]}
	}
	tlsConf, err := tunnel.ClientTLS("concentrator.demo", nil, pin, nil)
	if err != nil {
		return fail(err)
	}
	eo := tunnel.EdgeOptions{
		ID: "demo-edge", Device: edgeDev, MTU: demoMTU, Concentrator: concAddr.String(), TLS: tlsConf,
		Token: demoToken, Uplinks: uplinks, Paths: demoPathOptions, FEC: fopts, Picker: picker,
		Rules: o.Rules, Classify: o.Classify, Logger: demoLogger(),
	}
	eo.Paths.RetransmitOff = o.RetransmitOff
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
		Relays:  relays,
		Send: func(payload []byte) error {
			var err error
			if pkt, err = tuntest.AppendUDP4(pkt[:0], src, dst, payload); err != nil {
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
