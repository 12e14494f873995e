package bench

// The restart step of the scale scenario (--restart), at the largest
// bond count: the concentrator runs in a child process (scaleConcEnv) on
// a fixed port with a fixed certificate, the edges in theirs; with every
// bond up the concentrator is killed with SIGKILL and started again at
// once, as a crashed node restarted by systemd would be. The new process
// answers the old connections' packets with stateless resets (the same
// key, from the same certificate), so every edge redials at once: 2N
// handshakes arrive together. Measured: the time until every bond has
// both paths up again, the handshakes the node completed in each second
// (against the rate the ramp measured), and what its admission refused.
// The node runs with the default handshake bounds (tunnel.HandshakeOptions).
//
// Protocol of the concentrator process, on its stdout: {"event":
// "listening"}, then every 50 ms {"event":"status",...} (scaleConcMsg);
// it runs until its stdin ends.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/bondd/bondd/tun/tuntest"
	"github.com/bondd/bondd/tunnel"
)

const (
	scaleConcEnv = "BONDD_BENCH_SCALE_CONC"
	// scaleRestartTarget is the target time until every bond is back.
	scaleRestartTarget = 30 * time.Second
	// scaleIdle39RSSMiB is issue 39's resident memory per idle bond, and
	// scaleIdle39CPUPct its idle CPU for scaleIdle39Bonds idle bonds, in %
	// of one core; a smaller step's figure is scaled up to that many
	// bonds (the idle cost grows with the keepalives, one per path per
	// idle keepalive).
	scaleIdle39RSSMiB = 0.25
	scaleIdle39CPUPct = 10
	scaleIdle39Bonds  = 10000
)

// scaleConcConfig is what the parent tells the concentrator process.
type scaleConcConfig struct {
	Listen string   `json:"listen"` // host:port
	Cert   [][]byte `json:"cert"`   // DER chain
	Key    []byte   `json:"key"`    // PKCS #8 DER
	Bonds  int      `json:"bonds"`
}

// scaleConcMsg is one status line of the concentrator process.
type scaleConcMsg struct {
	Event string `json:"event"`
	Up    int    `json:"up"` // bonds with both paths up
	tunnel.HandshakeCounts
}

// runScaleConcChild runs the concentrator process until in ends.
func runScaleConcChild(cfg string, in io.Reader, out io.Writer) error {
	var c scaleConcConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		return err
	}
	raiseNoFile()
	key, err := x509.ParsePKCS8PrivateKey(c.Key)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", c.Listen)
	if err != nil {
		return err
	}
	dev := tuntest.New(demoMTU(), 64)
	go func() {
		for range dev.Outbound() {
		}
	}()
	conc, err := tunnel.NewConcentrator(tunnel.ConcentratorOptions{Device: dev, MTU: demoMTU(), Conn: pc,
		TLS: tunnel.ServerTLS(tls.Certificate{Certificate: c.Cert, PrivateKey: key}, nil), Edges: scaleEdgeAuths(c.Bonds)})
	if err != nil {
		pc.Close()
		return err
	}
	if err := conc.Start(); err != nil {
		return err
	}
	defer conc.Close()
	bonds := make([]*tunnel.Bond, c.Bonds)
	for i := range bonds {
		bonds[i] = conc.Bond(scaleEdgeID(i))
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(scaleConcMsg{Event: "listening"}); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, in); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
		}
		m := scaleConcMsg{Event: "status", HandshakeCounts: conc.Handshakes()}
		for _, b := range bonds {
			if b.PathsUp() == 2 {
				m.Up++
			}
		}
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
}

// scaleRestart is the restart step's result in results.json.
type scaleRestart struct {
	Bonds      int     `json:"bonds"`
	UpS        float64 `json:"up_s"`               // every bond up at first, from the edges' start
	AllBackS   float64 `json:"restart_all_back_s"` // from the SIGKILL to every bond with both paths up
	PerSecond  []int   `json:"handshakes_per_second"`
	MaxPerS    int     `json:"max_handshakes_per_s"` // the busiest second's completed handshakes
	RefPerS    float64 `json:"reference_handshakes_per_s"`
	Resumed    float64 `json:"resumed_share"` // of the handshakes after the restart
	Busy       uint64  `json:"busy"`
	SourceRate uint64  `json:"source_rate"`
	Retries    uint64  `json:"retries"`
	LoadAvg    string  `json:"load_avg"`
}

// runScaleRestart runs the restart step of n bonds; refPerS is the
// handshake rate the ramp measured (the reference of the per-second
// bound).
func runScaleRestart(ctx context.Context, o Options, n int, refPerS float64, out io.Writer) (scaleRestart, error) {
	rs := scaleRestart{Bonds: n, RefPerS: refPerS}
	cert, pin, err := tunnel.SelfSignedCert("concentrator.scale")
	if err != nil {
		return rs, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return rs, err
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return rs, err
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	cfg, _ := json.Marshal(scaleConcConfig{Listen: addr, Cert: cert.Certificate, Key: keyDER, Bonds: n})
	startConc := func() (*scaleChild, error) {
		kid, err := startScaleChild(ctx, scaleConcEnv, string(cfg))
		if err != nil {
			return nil, err
		}
		if _, err := kid.nextEvent("listening", 30*time.Second); err != nil {
			kid.stop()
			return nil, err
		}
		return kid, nil
	}
	// waitUp reads kid's status until every bond is up; onStatus sees each.
	waitUp := func(kid *scaleChild, t0 time.Time, onStatus func(scaleConcMsg)) error {
		until := t0.Add(60*time.Second + time.Duration(n)*50*time.Millisecond)
		for {
			line, err := kid.nextEvent("status", time.Until(until))
			if err != nil {
				return fmt.Errorf("bonds not back: %w", err)
			}
			var m scaleConcMsg
			json.Unmarshal([]byte(line), &m)
			if onStatus != nil {
				onStatus(m)
			}
			if m.Up == n {
				return nil
			}
		}
	}
	conc, err := startConc()
	if err != nil {
		return rs, err
	}
	defer func() { conc.stop() }()
	edges, err := startScaleEdges(ctx, scaleChildConfig{Concentrator: addr, Pin: pin, Bonds: n, Late: -1, PacketBytes: scalePacketBytes,
		Duration: o.Duration, MaxDialing: o.scaleDialing()}, o.scaleProcs(n))
	if err != nil {
		return rs, err
	}
	defer edges.stop()
	t0 := time.Now()
	if _, err := edges.all("started", 60*time.Second+time.Duration(n)*20*time.Millisecond); err != nil {
		return rs, err
	}
	if err := waitUp(conc, t0, nil); err != nil {
		return rs, err
	}
	rs.UpS = time.Since(t0).Seconds()
	if err := sleepUntil(ctx, time.Now().Add(time.Second), nil); err != nil { // tickets and tokens in
		return rs, err
	}

	conc.kill()
	t0 = time.Now()
	if conc, err = startConc(); err != nil {
		return rs, err
	}
	var last tunnel.HandshakeCounts
	err = waitUp(conc, t0, func(m scaleConcMsg) {
		sec := int(time.Since(t0) / time.Second)
		for len(rs.PerSecond) <= sec {
			rs.PerSecond = append(rs.PerSecond, 0)
		}
		rs.PerSecond[sec] += int(m.Accepted - last.Accepted)
		last = m.HandshakeCounts
	})
	rs.AllBackS = time.Since(t0).Seconds()
	rs.LoadAvg = loadAvg()
	if last.Accepted > 0 {
		rs.Resumed = float64(last.Resumed) / float64(last.Accepted)
	}
	rs.Busy, rs.SourceRate, rs.Retries = last.Busy, last.SourceRate, last.Retries
	for _, v := range rs.PerSecond {
		rs.MaxPerS = max(rs.MaxPerS, v)
	}
	if err != nil {
		rs.AllBackS = -1
		return rs, err
	}
	fmt.Fprintf(out, "  restart at %d bonds: all up in %.1f s at first; after SIGKILL and restart every bond back in %.2f s; handshakes per second %v (busiest %d, the ramp's rate %.0f); resumed %.3f; busy %d, source_rate %d, retries %d; load %s\n",
		n, rs.UpS, rs.AllBackS, rs.PerSecond, rs.MaxPerS, refPerS, rs.Resumed, rs.Busy, rs.SourceRate, rs.Retries, rs.LoadAvg)
	return rs, nil
}

// scaleTargets39 checks issue 39's targets on what ran: handshake rates,
// the flood's effects, and the restart.
func scaleTargets39(r *scaleReport) []target {
	var ts []target
	var last *scaleStep
	for i := range r.Steps {
		if r.Steps[i].Limit == "" {
			last = &r.Steps[i]
		}
	}
	add := func(name, want string, known bool, got float64, met bool) {
		ts = append(ts, target{Name: name, Want: want, Known: known, Got: got, Met: known && met})
	}
	if last != nil {
		add(fmt.Sprintf("RSS per idle bond at %d bonds, MiB", last.Bonds), fmt.Sprintf("≤ %.2f", scaleIdle39RSSMiB), true, last.RSSMiBPerIdle,
			last.RSSMiBPerIdle <= scaleIdle39RSSMiB)
		cpu := last.IdleCPUPct * scaleIdle39Bonds / float64(last.Bonds)
		name := fmt.Sprintf("idle CPU of %d bonds, %% of a core", last.Bonds)
		if last.Bonds != scaleIdle39Bonds {
			name = fmt.Sprintf("idle CPU of %d bonds (%d measured, scaled), %% of a core", scaleIdle39Bonds, last.Bonds)
		}
		add(name, fmt.Sprintf("≤ %d", scaleIdle39CPUPct), true, cpu, cpu <= scaleIdle39CPUPct)
		add(fmt.Sprintf("fresh handshakes per second at %d bonds", last.Bonds), "≥ 500", true, last.HandshakesPerS, last.HandshakesPerS >= 500)
		add(fmt.Sprintf("resumed handshakes per second at %d bonds", last.Bonds), "≥ 1500", true, last.HandshakesPerSResumed, last.HandshakesPerSResumed >= 1500)
	}
	fl := r.Flood
	add("flood: active bonds' lowest delivered share", fmt.Sprintf("≥ %.3f", scaleFloodShareTarget), fl != nil, val(fl, func(f *scaleFlood) float64 { return f.ActiveMinShare }),
		fl != nil && fl.ActiveMinShare >= scaleFloodShareTarget)
	add("flood: a new edge's first path up, s", fmt.Sprintf("≤ %.0f", scaleNewEdgeTarget.Seconds()), fl != nil, val(fl, func(f *scaleFlood) float64 { return f.NewEdgeFirstS }),
		fl != nil && fl.NewEdgeFirstS >= 0 && fl.NewEdgeFirstS <= scaleNewEdgeTarget.Seconds())
	add("flood: node memory growth, MiB", fmt.Sprintf("≤ %d", scaleFloodMemTargetMiB), fl != nil, val(fl, func(f *scaleFlood) float64 { return f.RSSGrowthMiB }),
		fl != nil && fl.RSSGrowthMiB <= scaleFloodMemTargetMiB)
	rs := r.Restart
	add("restart: every bond back, s", fmt.Sprintf("≤ %.0f", scaleRestartTarget.Seconds()), rs != nil && rs.AllBackS >= 0, val(rs, func(x *scaleRestart) float64 { return x.AllBackS }),
		rs != nil && rs.AllBackS >= 0 && rs.AllBackS <= scaleRestartTarget.Seconds())
	ratio := val(rs, func(x *scaleRestart) float64 {
		if x.RefPerS <= 0 {
			return 0
		}
		return float64(x.MaxPerS) / x.RefPerS
	})
	add("restart: busiest second / the ramp's handshake rate", "≤ 2", rs != nil && rs.RefPerS > 0, ratio, ratio <= 2)
	return ts
}

// val returns f(p), or 0 for nil p.
func val[T any](p *T, f func(*T) float64) float64 {
	if p == nil {
		return 0
	}
	return f(p)
}

// scaleMarkdown39 renders the handshake table and the flood and restart
// steps of results.md.
func scaleMarkdown39(r *scaleReport) string {
	var b strings.Builder
	b.WriteString("\nHandshakes (path connections: QUIC handshake and hello), as the node sees them; the node's CPU is its process's over the handshakes, per handshake. Each edge has its own TLS session cache: a fresh handshake resumes only when an edge's second path finds the ticket its first got:\n\n")
	b.WriteString("| bonds | fresh /s | node CPU ms per fresh | fresh: share resumed | resumed /s | node CPU ms per resumed | share resumed | load avg |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, s := range r.Steps {
		if s.Limit == "" {
			fmt.Fprintf(&b, "| %d | %.0f | %.2f | %.3f | %.0f | %.2f | %.3f | %s |\n", s.Bonds, s.HandshakesPerS, s.HandshakeCPUms, s.FreshResumedShare, s.HandshakesPerSResumed, s.ResumedCPUms, s.ResumedShare, s.LoadAvg)
		}
	}
	if fl := r.Flood; fl != nil {
		fmt.Fprintf(&b, "\nFlood at %d bonds (%s): %.0f spoofed Initial datagrams/s (offered %.0f). Active bonds delivered %.4f of what they sent (lowest %.4f); "+
			"a new edge's first path was up in %.3f s, both in %.3f s; the node's resident memory grew %.1f MiB (its live heap %.1f MiB) and it used %.0f %% of a core; "+
			"it answered %d Initials with a Retry and refused %d (busy) and %d (source rate); %d connections never completed. Load %s.\n",
			fl.Bonds, fl.Source, fl.FloodPPS, fl.OfferedPPS, fl.ActiveShare, fl.ActiveMinShare, fl.NewEdgeFirstS, fl.NewEdgeBothS,
			fl.RSSGrowthMiB, fl.LiveGrowthMiB, fl.CPUPct, fl.Retries, fl.Busy, fl.SourceRate, fl.HandshakeFails, fl.LoadAvg)
	}
	if rs := r.Restart; rs != nil {
		fmt.Fprintf(&b, "\nRestart at %d bonds (the concentrator in a child process, SIGKILL, started again): every bond back in %.2f s; "+
			"handshakes completed per second %v (busiest %d; the ramp measured %.0f/s); %.3f resumed; busy %d, source_rate %d, retries %d. Load %s.\n",
			rs.Bonds, rs.AllBackS, rs.PerSecond, rs.MaxPerS, rs.RefPerS, rs.Resumed, rs.Busy, rs.SourceRate, rs.Retries, rs.LoadAvg)
	}
	return b.String()
}
