package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel"
)

// The netns testbed: three namespaces in one process.
//
//	edge ns                    emu ns                        concentrator ns
//	bondd0 10.77.0.2/24        relays on 10.100.i.1:4433 ──► 10.200.0.2:4433
//	upI 10.100.I.2/24 ◄─veth─► upI 10.100.I.1/24
//	                           wan 10.200.0.1/24 ◄─veth──► wan 10.200.0.2/24
//	                                                         bondd0 10.78.0.1/24
//
// The flow goes from a UDP socket on 10.77.0.2 in the edge namespace to one
// on 10.78.0.1 in the concentrator namespace, through both TUN devices.

const demoNSPrefix = "bondd-demo-"

func newNetnsBed(o BedOptions) (bed *Bed, err error) {
	sc, seed, fopts, picker := o.Scenario, o.Seed, o.FEC, o.Picker
	testbed.Cleanup(demoNSPrefix) // namespaces left by a killed earlier run
	tb := testbed.New(demoNSPrefix)
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		tb.Close()
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	nsEdge, err := tb.NewNS()
	if err != nil {
		return nil, err
	}
	nsEmu, err := tb.NewNS()
	if err != nil {
		return nil, err
	}
	nsConc, err := tb.NewNS()
	if err != nil {
		return nil, err
	}
	concWAN := netip.MustParseAddrPort("10.200.0.2:4433")
	if err := tb.Veth(nsEmu, "wan", netip.MustParsePrefix("10.200.0.1/24"), nsConc, "wan", netip.MustParsePrefix("10.200.0.2/24")); err != nil {
		return nil, err
	}

	// Concentrator: TUN, UDP listener, bond.
	cert, pin, err := tunnel.SelfSignedCert("concentrator.demo")
	if err != nil {
		return nil, err
	}
	var concDev tun.Device
	var pc net.PacketConn
	err = nsConc.Do(func() error {
		concDev, err = tun.Open(tun.Config{Name: "bondd0", Addrs: []netip.Prefix{demoServerInner}, MTU: demoMTU,
			Routes: []netip.Prefix{demoEdgeInner.Masked()}})
		if err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", concWAN.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("concentrator namespace: %w", err)
	}
	conc, err := startConcentrator(o, concDev, pc, cert)
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { conc.Close() })

	// One veth and one relay per uplink.
	// The veths and the relays' sockets first, then the relays in a quick
	// loop, so that Created is within a millisecond of every relay's
	// start (its links' model time 0).
	veths, err := tb.Uplinks(nsEdge, nsEmu, len(sc.Paths), 100)
	if err != nil {
		return nil, err
	}
	var listeners []*net.UDPConn
	for i := range sc.Paths {
		l, err := nsEmu.ListenUDP(netip.AddrPortFrom(veths[i].B.Addr(), 4433).String())
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { l.Close() }) // a no-op once its relay owns and closed it
		listeners = append(listeners, l)
	}
	var uplinks []tunnel.UplinkOptions
	var relays emu.Relays
	created := time.Now()
	for i, p := range sc.Paths {
		name, edgeSide, l := veths[i].Name, veths[i].A, listeners[i]
		r, err := emu.NewRelay(emu.Options{
			Listen: l, Upstream: concWAN, Up: p.Up, Down: p.Down, Seed: seed + uint64(i),
			DialUpstream: func() (net.PacketConn, error) { return nsEmu.ListenUDP("10.200.0.1:0") },
		})
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("path %s: %w", p.Name, err)
		}
		closers = append(closers, func() { r.Close() })
		relays = append(relays, r)
		uplinks = append(uplinks, tunnel.UplinkOptions{Name: p.Name, Bind: edgeSide.Addr(), Interface: name,
			Remote: r.Addr().String(), Labels: p.Labels, LEOReconf: o.LEO[p.Name]})
	}

	// Edge: TUN and bond; uplink sockets are opened inside the edge namespace.
	var edgeDev tun.Device
	var sender *net.UDPConn
	err = nsEdge.Do(func() error {
		edgeDev, err = tun.Open(tun.Config{Name: "bondd0", Addrs: []netip.Prefix{demoEdgeInner}, MTU: demoMTU,
			Routes: []netip.Prefix{demoServerInner.Masked()}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("edge namespace: %w", err)
	}
	tlsConf, err := tunnel.ClientTLS("concentrator.demo", nil, pin, nil)
	if err != nil {
		edgeDev.Close()
		return nil, err
	}
	eo := tunnel.EdgeOptions{
		ID: "demo-edge", Device: edgeDev, MTU: demoMTU, Concentrator: concWAN.String(), TLS: tlsConf,
		Token: demoToken, Uplinks: uplinks, Paths: demoPathOptions, FEC: fopts, Picker: picker,
		Rules: o.Rules, Classify: o.Classify, Logger: demoLogger(),
		Listen: func(ctx context.Context, u tunnel.UplinkOptions) (pc net.PacketConn, err error) {
			err = nsEdge.Do(func() error { pc, err = tunnel.ListenUplink(ctx, u); return err })
			return pc, err
		},
	}
	eo.Paths.RetransmitOff = o.RetransmitOff
	err = applyRateControl(o.RateControl, &eo, nil)
	var edge *tunnel.Edge
	if err == nil {
		edge, err = tunnel.NewEdge(eo)
	}
	if err != nil {
		edgeDev.Close()
		return nil, err
	}
	edge.Start()
	closers = append(closers, func() { edge.Close() })

	// The flow's endpoints.
	dst := netip.AddrPortFrom(demoServerInner.Addr(), demoPort)
	err = nsEdge.Do(func() error {
		sender, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(demoEdgeInner.Addr(), demoPort)),
			net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { sender.Close() })
	receiver, err := nsConc.ListenUDP(dst.String())
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { receiver.Close() })
	if err := setReceiveBuffer(receiver, receiveBuffer); err != nil {
		return nil, err
	}

	return &Bed{
		Mode:    "netns",
		Edge:    edge.Bond(),
		Conc:    conc.Bond("demo-edge"),
		Created: created,
		Relays:  relays,
		Send:    func(payload []byte) error { _, err := sender.Write(payload); return err },
		Recv: func(ctx context.Context, deliver func([]byte, time.Time)) {
			stop := context.AfterFunc(ctx, func() { receiver.SetReadDeadline(time.Now()) })
			defer stop()
			buf := make([]byte, 2048)
			for {
				n, err := receiver.Read(buf)
				if err != nil {
					return
				}
				deliver(buf[:n], time.Now())
			}
		},
		Close:  cleanup,
		EdgeNS: nsEdge.Name(),
		ConcNS: nsConc.Name(),
	}, nil
}

// receiveBuffer is the flow receiver's socket buffer, bytes. The default
// (net.core.rmem_default, 208 KiB) holds 44 ms of the steady links' 45
// Mbit/s: a receiving goroutine that waited longer on a loaded 2-core
// host lost up to 1 % of the flow there, which the bench counted against
// the bond (`bondd bench capacity --configs steady-udp-90`, seed 2:
// 1.13 % lost with 59 datagrams dropped by bondd, 0.40 % with 365 after).
const receiveBuffer = 4 << 20

// setReceiveBuffer sets c's receive buffer to n bytes, past
// net.core.rmem_max (SO_RCVBUFFORCE: the netns bed runs as root).
func setReceiveBuffer(c *net.UDPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("receiver's socket buffer: %w", serr)
	}
	return nil
}
