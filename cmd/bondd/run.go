package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel"
)

func newRunCmd() *cobra.Command {
	var cfgPath, ctlPath string
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run an edge or a concentrator from a config file",
		Long: "Run opens the TUN device and the uplinks described in the config file and\n" +
			"carries traffic until SIGINT or SIGTERM. See docs/config.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDaemon(ctx, cfg, ctlPath, newLogger(cfg.LogLevel, cfg.LogFormat, os.Stderr))
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML)")
	cmd.MarkFlagRequired("config")
	cmd.Flags().StringVar(&ctlPath, "control-socket", defaultControlSocket, "Unix socket serving status to bondd status; empty: none")
	return cmd
}

// daemon is a running edge or concentrator.
type daemon interface{ Close() error }

// runDaemon starts the configured role, its control socket and metrics
// endpoint, and blocks until ctx is done.
func runDaemon(ctx context.Context, cfg *config.Config, ctlPath string, log *slog.Logger) error {
	if ctlPath != "" {
		if err := status.SocketFree(ctlPath); err != nil {
			return err
		}
	}
	var (
		rw *rules.Watcher
		rt *ruleTracker
	)
	if cfg.Rules != "" {
		var err error
		rt = newRuleTracker(cfg.Rules)
		if rw, err = startRules(cfg, log, rt.onReload); err != nil {
			return err
		}
		rt.w = rw
		defer rw.Close()
	}
	// SIGHUP reloads the rules (systemctl reload). Without a rule file it
	// is logged and ignored rather than ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() { signal.Stop(hup); close(hup) }() // no send after Stop returns
	var reload atomic.Pointer[func()]               // the concentrator's edge list (fleet.go), once started
	go func() {
		for range hup {
			if f := reload.Load(); f != nil {
				(*f)()
			}
			if rw == nil {
				log.Info("SIGHUP: no rule file configured; nothing to reload")
				continue
			}
			log.Info("SIGHUP: reloading the rules", "file", cfg.Rules)
			rw.Reload() // a failure is logged by the watcher; the old rules stay
		}
	}()
	d, err := startDaemon(cfg, rw, log)
	if err != nil {
		return err
	}
	if n, ok := d.(*fleetNode); ok && cfg.File() != "" {
		f := func() { n.reloadEdges(cfg.File(), cfg.TUN.Name) }
		reload.Store(&f)
	}
	src := newStatusSource(d, cfg, rt)
	if ctlPath != "" {
		ctl, err := status.Serve(ctlPath, src.report, drainFunc(d))
		if err != nil {
			d.Close()
			return err
		}
		defer ctl.Close()
		defer os.Remove(ctlPath)
	}
	if cfg.MetricsListen != "" {
		srv, addr, err := serveMetrics(cfg.MetricsListen, src.report, log)
		if err != nil {
			d.Close()
			return err
		}
		defer srv.Close()
		log.Info("metrics listening", "url", "http://"+addr.String()+"/metrics")
	}
	<-ctx.Done()
	log.Info("shutting down")
	return d.Close()
}

// startRules loads the rule file and watches it for changes; onReload is
// the watcher's OnReload hook.
func startRules(cfg *config.Config, log *slog.Logger, onReload func(*rules.Set, error)) (*rules.Watcher, error) {
	copts, err := cfg.Classify.Options()
	if err != nil {
		return nil, err
	}
	return rules.NewWatcher(rules.WatcherOptions{Path: cfg.Rules, Compile: rules.Options{Classes: copts.Classes}, Logger: log, OnReload: onReload})
}

// startDaemon opens the TUN and starts the edge or concentrator of cfg;
// rw, if not nil, supplies the rules.
func startDaemon(cfg *config.Config, rw *rules.Watcher, log *slog.Logger) (daemon, error) {
	var src tunnel.RuleSource
	if rw != nil {
		src = rw
	}
	copts, err := cfg.Classify.Options()
	if err != nil {
		return nil, err
	}
	fopts := tunnel.FECOptions{Mode: cfg.FEC.Mode, K: cfg.FEC.K, Alpha: cfg.FEC.Alpha, Ratio: cfg.FEC.Ratio, Budget: cfg.FEC.Budget}
	popts := tunnel.PathOptions{
		MaxQueueDelay:     cfg.Paths.MaxQueueDelay,
		QueuePackets:      cfg.Paths.QueuePackets,
		Keepalive:         cfg.Paths.Keepalive,
		IdleTimeout:       cfg.Paths.IdleTimeout,
		RedialMin:         cfg.Paths.RedialMin,
		RedialMax:         cfg.Paths.RedialMax,
		InitialPacketSize: cfg.Paths.InitialPacketSizeBytes,
		RateControl:       cfg.Paths.RateControl,
		SuspectRTTs:       cfg.Paths.SuspectRTTs,
		SuspectMin:        cfg.Paths.SuspectMin,
		DeadAfter:         cfg.Paths.DeadAfter,
		StaleAfter:        cfg.Paths.StaleAfter,
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
	var d daemon
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

func startEdge(cfg *config.Config, dev tun.Device, co commonOptions, log *slog.Logger) (daemon, error) {
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
		uplinks = append(uplinks, tunnel.UplinkOptions{Name: u.Name, Bind: u.Bind, Interface: u.Interface, Remote: u.Remote, Labels: u.Labels, Lanes: u.Lanes,
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
	var d daemon = e
	if dw != nil {
		d = edgeWithDownlink{e, dw}
	}
	if ef != nil {
		ef.start(e)
		d = fleetEdge{d, ef}
	}
	return d, nil
}

// edgeWithDownlink is an edge daemon with the watcher of its downlink rule
// file, closed after it.
type edgeWithDownlink struct {
	*tunnel.Edge
	w *rules.Watcher
}

func (d edgeWithDownlink) Close() error { err := d.Edge.Close(); d.w.Close(); return err }

func startConcentrator(cfg *config.Config, dev tun.Device, co commonOptions, log *slog.Logger) (daemon, error) {
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

// newLogger returns a slog logger at level ("debug", "info", "warn",
// "error") in format "text" or "json".
func newLogger(level, format string, w *os.File) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		lv = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}
