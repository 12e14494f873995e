// Package node assembles what bondd run starts from a config file
// (docs/config.md): the edge, with failover between the nodes of a fleet,
// or the concentrator, with its BGP speaker (docs/design.md "Fleet"). It
// also reads a running daemon back for the status report, drains a
// concentrator and reloads its edge list. The command line, signals,
// control socket and metrics endpoint stay in cmd/bondd.
package node

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel"
)

// Daemon is a running edge or concentrator; Close stops it (a
// concentrator with a BGP speaker drains first) and returns the error of
// closing its tunnel.
type Daemon interface{ Close() error }

// Start opens the TUN device and starts the edge or concentrator of cfg
// (docs/config.md); rw, if not nil, supplies the rules. It returns the
// running daemon, which Close stops, or the first error of the config's
// files (certificates, tokens, qlog_dir), the TUN device, the scheduler,
// the listening socket or the BGP speaker; nothing is left running then.
func Start(cfg *config.Config, rw *rules.Watcher, log *slog.Logger) (Daemon, error) {
	var src tunnel.RuleSource
	if rw != nil {
		src = rw
	}
	copts, err := cfg.Classify.Options()
	if err != nil {
		return nil, err
	}
	fopts := tunnel.FECOptions{Mode: cfg.FEC.Mode, K: cfg.FEC.K, Alpha: cfg.FEC.Alpha, Ratio: cfg.FEC.Ratio, Budget: cfg.FEC.Budget,
		VideoResidual: cfg.FEC.TunnelVideoResidual(), Placement: cfg.FEC.Placement}
	popts := tunnel.PathOptions{
		MaxQueueDelay:     cfg.Paths.MaxQueueDelay,
		QueuePackets:      cfg.Paths.QueuePackets,
		Keepalive:         cfg.Paths.Keepalive,
		IdleKeepalive:     cfg.Paths.IdleKeepalive,
		IdleTimeout:       cfg.Paths.IdleTimeout,
		RedialMin:         cfg.Paths.RedialMin,
		RedialMax:         cfg.Paths.RedialMax,
		InitialPacketSize: cfg.Paths.InitialPacketSizeBytes,
		RateControl:       cfg.Paths.RateControl,
		SuspectRTTs:       cfg.Paths.SuspectRTTs,
		SuspectMin:        cfg.Paths.SuspectMin,
		DeadAfter:         cfg.Paths.DeadAfter,
		StaleAfter:        cfg.Paths.StaleAfter,
		PMTUOff:           cfg.Paths.PMTUOff,
		RetransmitOff:     cfg.Paths.RetransmitOff,
		PMTURaise:         cfg.Paths.PMTURaise,
		QlogDir:           cfg.QlogDir,
	}
	if cfg.QlogDir != "" {
		if err := os.MkdirAll(cfg.QlogDir, 0o750); err != nil {
			return nil, fmt.Errorf("qlog_dir: %w", err)
		}
		log.Info("writing a qlog file per path connection", "dir", cfg.QlogDir)
	}
	mtu := cfg.TUN.MTU
	if mtu == 0 {
		mtu = tunnel.MTUFor(cfg.Paths.InitialPacketSizeBytes)
	}
	dev, err := tun.Open(tun.Config{Name: cfg.TUN.Name, Addrs: cfg.TUN.Addresses, MTU: mtu, Routes: tunRoutes(cfg)})
	if err != nil {
		return nil, err
	}
	log.Info("tun up", "name", cfg.TUN.Name, "mtu", mtu, "addresses", cfg.TUN.Addresses)
	picker, err := policy.NewPicker(cfg.Scheduler)
	if err != nil {
		dev.Close()
		return nil, err
	}
	common := commonOptions{mtu: mtu, paths: popts, fec: fopts, rules: src, classify: copts, picker: picker}
	var d Daemon
	switch cfg.Role {
	case "edge":
		d, err = startEdge(cfg, dev, common, log)
	case "concentrator":
		d, err = startConcentrator(cfg, dev, common, log)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err != nil {
		dev.Close()
		return nil, err
	}
	return d, nil
}

// commonOptions are the tunnel options both roles share.
type commonOptions struct {
	mtu      int
	paths    tunnel.PathOptions
	fec      tunnel.FECOptions
	rules    tunnel.RuleSource
	classify classify.Options
	picker   policy.Picker
}

func startEdge(cfg *config.Config, dev tun.Device, co commonOptions, log *slog.Logger) (Daemon, error) {
	ec := cfg.Edge
	roots, err := loadCertPool(ec.CAFile)
	if err != nil {
		return nil, err
	}
	var clientCert *tls.Certificate
	var token []byte
	if ec.CertFile != "" {
		c, err := tls.LoadX509KeyPair(ec.CertFile, ec.KeyFile)
		if err != nil {
			return nil, err
		}
		clientCert = &c
	} else {
		t, err := cfg.LoadToken(ec.TokenFile)
		if err != nil {
			return nil, err
		}
		token = t
	}
	serverName := ec.ServerName
	if serverName == "" {
		host, _, _ := net.SplitHostPort(ec.Concentrator)
		serverName = host
	}
	tlsConf, err := tunnel.ClientTLS(serverName, roots, ec.ServerCertSHA256, clientCert)
	if err != nil {
		return nil, err
	}
	var uplinks []tunnel.UplinkOptions
	for _, u := range ec.Uplinks {
		uplinks = append(uplinks, tunnel.UplinkOptions{Name: u.Name, Bind: u.Bind, Interface: u.Interface, Remote: u.Remote, Labels: u.Labels,
			LEOReconf: u.LEOReconf, Budget: u.Budget})
	}
	// Downlink rules are compiled here without traffic classes: the
	// concentrator compiles them again against its own.
	var downlink tunnel.RuleSource
	var dw *rules.Watcher
	if ec.DownlinkRules != "" {
		if dw, err = rules.NewWatcher(rules.WatcherOptions{Path: ec.DownlinkRules, Logger: log.With("rules", "downlink")}); err != nil {
			return nil, err
		}
		downlink = dw
	}
	eo := tunnel.EdgeOptions{
		ID: ec.ID, Device: dev, MTU: co.mtu, Concentrator: ec.Concentrator, TLS: tlsConf, Token: token,
		Uplinks: uplinks, Paths: co.paths, FEC: co.fec, Rules: co.rules, Classify: co.classify, Picker: co.picker, Logger: log,
		DownlinkRules: downlink,
		SetTUNMTU:     tunMTUSetter(cfg, dev, log),
	}
	ef := edgeFleetFor(ec, &eo, log) // nil with one node (fleet.go)
	e, err := tunnel.NewEdge(eo)
	if err != nil {
		if dw != nil {
			dw.Close()
		}
		return nil, err
	}
	e.Start()
	log.Info("edge started", "id", ec.ID, "concentrator", eo.Concentrator, "uplinks", len(uplinks))
	// A returning uplink is redialled at once (uplinks.go).
	uw, err := watchUplinks(ec.Uplinks, e.Kick, log)
	if err != nil {
		log.Warn("not watching the uplinks' interfaces: an uplink that comes back waits for its redial backoff", "err", err)
	}
	var d Daemon = e
	if dw != nil || uw != nil {
		d = edgeWithDownlink{e, dw, uw}
	}
	if ef != nil {
		ef.start(e)
		d = fleetEdge{d, ef}
	}
	return d, nil
}

// edgeWithDownlink is an edge daemon with its watchers, closed after
// it: of its downlink rule file (nil without one) and of its uplinks'
// interfaces (uplinks.go; nil when netlink is unavailable).
type edgeWithDownlink struct {
	*tunnel.Edge
	w     *rules.Watcher
	links *uplinkWatcher
}

func (d edgeWithDownlink) Close() error {
	if d.links != nil {
		d.links.Close()
	}
	err := d.Edge.Close()
	if d.w != nil {
		d.w.Close()
	}
	return err
}

func startConcentrator(cfg *config.Config, dev tun.Device, co commonOptions, log *slog.Logger) (Daemon, error) {
	cc := cfg.Concentrator
	cert, err := tls.LoadX509KeyPair(cc.CertFile, cc.KeyFile)
	if err != nil {
		return nil, err
	}
	clientCAs, err := loadCertPool(cc.ClientCAFile)
	if err != nil {
		return nil, err
	}
	edges, err := edgeAuths(cfg)
	if err != nil {
		return nil, err
	}
	copts := tunnel.ConcentratorOptions{
		Device: dev, MTU: co.mtu, TLS: tunnel.ServerTLS(cert, clientCAs), Edges: edges,
		Paths: co.paths, FEC: co.fec, Rules: co.rules, Classify: co.classify, Picker: co.picker, Logger: log,
	}
	if h := cc.Handshakes; h != nil {
		copts.Handshakes = tunnel.HandshakeOptions{Rate: h.RatePerS, Burst: h.Burst, PerSource: h.PerSourcePerS,
			PerSourceBurst: h.PerSourceBurst, RetryAbove: h.RetryAbove}
	}
	if warn := keyWarning(cert); warn != "" {
		log.Warn(warn, "cert_file", cc.CertFile)
	}
	n := &fleetNode{log: log}
	if cc.BGP != nil { // announce each bond's prefixes (fleet.go)
		if n.speaker, err = startSpeaker(cfg, log); err != nil {
			return nil, err
		}
		copts.OnBondUp, copts.OnBondDown = newBondHooks(n.speaker, log)
	}
	stopSpeaker := func() {
		if n.speaker != nil {
			n.speaker.Stop(context.Background(), false)
		}
	}
	pc, err := net.ListenPacket("udp", cc.Listen)
	if err != nil {
		stopSpeaker()
		return nil, err
	}
	copts.Conn = pc
	c, err := tunnel.NewConcentrator(copts)
	if err != nil {
		pc.Close()
		stopSpeaker()
		return nil, err
	}
	if err := c.Start(); err != nil {
		stopSpeaker()
		return nil, err
	}
	n.Concentrator = c
	log.Info("concentrator listening", "addr", pc.LocalAddr(), "edges", len(edges))
	return n, nil
}

// edgeAuths returns the edge list of a concentrator config, with each
// edge's token read from its file.
func edgeAuths(cfg *config.Config) ([]tunnel.EdgeAuth, error) {
	var edges []tunnel.EdgeAuth
	for _, e := range cfg.Concentrator.Edges {
		ea := tunnel.EdgeAuth{ID: e.ID, CertCN: e.CertCN, AllowedPrefixes: e.AllowedPrefixes,
			AllowEdgeRules: e.AllowEdgeRules, PolicyLabelKeys: e.PolicyLabelKeys}
		if e.TokenFile != "" {
			var err error
			if ea.Token, err = cfg.LoadToken(e.TokenFile); err != nil {
				return nil, err
			}
		}
		edges = append(edges, ea)
	}
	return edges, nil
}

// tunRoutes returns the routes to install on the TUN: tun.routes and, on a
// concentrator, every edge's allowed prefixes, so that downlink traffic for
// an edge enters the tunnel without extra configuration. A prefix already
// routed there (listed, or the on-link prefix of a TUN address) is skipped.
func tunRoutes(cfg *config.Config) []netip.Prefix {
	routes := slices.Clone(cfg.TUN.Routes)
	have := map[netip.Prefix]bool{}
	for _, r := range routes {
		have[r.Masked()] = true
	}
	for _, a := range cfg.TUN.Addresses {
		have[a.Masked()] = true
	}
	if cc := cfg.Concentrator; cc != nil {
		for _, e := range cc.Edges {
			for _, p := range e.AllowedPrefixes {
				if p = p.Masked(); !have[p] {
					have[p] = true
					routes = append(routes, p)
				}
			}
		}
	}
	return routes
}

// loadCertPool reads a PEM file of CA certificates; an empty path gives nil.
func loadCertPool(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", path)
	}
	return pool, nil
}

// Report fills r's role, the concentrator's counters and the BGP and fleet
// sections from d, and returns d's bonds (one on an edge, one per
// connected edge on a concentrator).
func Report(d Daemon, r *status.Report) []tunnel.BondStats {
	switch d := d.(type) {
	case *tunnel.Edge:
		r.Role = config.RoleEdge
		return []tunnel.BondStats{d.Bond().Stats()}
	case edgeWithDownlink:
		r.Role = config.RoleEdge
		return []tunnel.BondStats{d.Bond().Stats()}
	case fleetEdge:
		r.Role = config.RoleEdge
		r.Fleet = d.f.status()
		return []tunnel.BondStats{d.Bond().Stats()}
	case *tunnel.Concentrator:
		r.Role = config.RoleConcentrator
		r.NoRoute, r.AuthFailures, r.LinkLocal = d.NoRoute(), d.AuthFailures(), d.LinkLocal()
		r.TransportDrops = d.TransportDropCounts()
		return d.Stats()
	case *fleetNode:
		r.Role = config.RoleConcentrator
		r.NoRoute, r.AuthFailures, r.LinkLocal = d.NoRoute(), d.AuthFailures(), d.LinkLocal()
		r.TransportDrops = d.TransportDropCounts()
		r.BGP = d.bgpStatus()
		return d.Stats()
	}
	return nil
}

// Drain is what POST /drain on the control socket does to d: a
// concentrator tells its edges to move, stops accepting edges and
// withdraws its BGP announcements; it keeps running until Close. An edge
// (or nil) has nothing to drain: the error says so.
func Drain(d Daemon) error {
	n, ok := d.(*fleetNode)
	if !ok {
		return errors.New("only a concentrator drains")
	}
	n.Drain()
	return nil
}

// EdgeReloader returns what SIGHUP does to a concentrator's edge list: read
// the config file again and replace the list, routing new edges' prefixes
// into the TUN device tunName (a failure is logged; the running list
// stays). It returns nil for an edge.
func EdgeReloader(d Daemon, file, tunName string) func() {
	n, ok := d.(*fleetNode)
	if !ok {
		return nil
	}
	return func() { n.reloadEdges(file, tunName) }
}

// tunMTUSetter returns the edge's tunnel.EdgeOptions.SetTUNMTU: it sets
// the MTU path MTU discovery asks for on dev, but never below 1280 bytes
// when the tunnel carries IPv6 (Linux would remove the device's IPv6
// addresses; bondd answers the IPv4 packets in between with ICMP itself).
func tunMTUSetter(cfg *config.Config, dev tun.Device, log *slog.Logger) func(int) error {
	floor := tun.MinMTU
	for _, p := range append(tunRoutes(cfg), cfg.TUN.Addresses...) {
		if p.Addr().Is6() {
			floor = tun.DefaultMTU
		}
	}
	return func(mtu int) error {
		if mtu < floor {
			log.Info("TUN MTU kept at the IPv6 minimum; larger IPv4 packets are answered with ICMP", "want", mtu, "set", floor)
			mtu = floor
		}
		return tun.SetMTU(dev, mtu)
	}
}

// keyWarning returns a warning when the concentrator's certificate key
// makes every full handshake expensive: an RSA signature costs the node
// about 1 ms of CPU, against tens of µs for ECDSA P-256 or Ed25519
// (BenchmarkHandshake in tunnel; docs/performance.md). "" otherwise.
func keyWarning(cert tls.Certificate) string {
	if _, ok := cert.PrivateKey.(*rsa.PrivateKey); ok {
		return "the concentrator's key is RSA: each full handshake costs the node a slow RSA signature; an ECDSA P-256 or Ed25519 key is cheaper (docs/operations.md)"
	}
	return ""
}
