package demo

import (
	"crypto/tls"
	"net"
	"net/netip"

	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel"
)

// startConcentrator starts the testbed's concentrator on dev and pc, with
// o's FEC, picker and rate control, for the one edge "demo-edge". On error
// it closes dev and pc.
func startConcentrator(o BedOptions, dev tun.Device, pc net.PacketConn, cert tls.Certificate) (*tunnel.Concentrator, error) {
	co := tunnel.ConcentratorOptions{
		Device: dev, MTU: demoMTU, Conn: pc, TLS: tunnel.ServerTLS(cert, nil), Paths: demoPathOptions, FEC: o.FEC, Picker: o.Picker,
		Edges: []tunnel.EdgeAuth{{ID: "demo-edge", Token: demoToken, AllowedPrefixes: []netip.Prefix{demoEdgeInner.Masked()}}},
	}
	co.Paths.RetransmitOff = o.RetransmitOff
	err := applyRateControl(o.RateControl, nil, &co)
	var conc *tunnel.Concentrator
	if err == nil {
		conc, err = tunnel.NewConcentrator(co)
	}
	if err != nil {
		dev.Close()
		pc.Close()
		return nil, err
	}
	if err := conc.Start(); err != nil {
		conc.Close()
		return nil, err
	}
	return conc, nil
}
