package bench

// The flood step of the scale scenario (--flood PPS), at the largest
// bond count: a hostile sender replays the first flights of QUIC
// connection attempts (tunnel.InitialFlights: real ClientHellos, each
// attempt with its own connection IDs) at the concentrator from
// scaleFloodSources loopback addresses that never answer, as spoofed
// packets would be, while the active bonds send. The bench has no
// network namespace between the sender and the node: the node's socket is
// on loopback in the bench process, so the hostile source is on loopback
// too. Measured: the active bonds' delivered share under the flood, the
// time a new (late) edge takes to connect, the node's resident memory
// growth, and what the node's admission did (Retries, refusals).
//
// The flood runs in its own child process (scaleFloodEnv). Protocol on
// its stdout: {"event":"ready"} once its flights are built;
// {"event":"flooded","sent":N,"secs":S} after its stdin says "stop" (or
// ends). "go" on its stdin starts the flood.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/tunnel"
)

const (
	scaleFloodEnv = "BONDD_BENCH_SCALE_FLOOD"
	// scaleFloodSources is the number of source addresses of the flood:
	// 127.200.0.1 and up.
	scaleFloodSources = 256
	// scaleFloodFlightsMax bounds the distinct attempts the flood
	// replays (building one costs about 1.5 ms).
	scaleFloodFlightsMax = 2000
	// scaleNewEdgeTarget is the target time for a new edge to connect
	// under the flood.
	scaleNewEdgeTarget = 2 * time.Second
	// scaleFloodMemTargetMiB bounds the node's memory growth under it.
	scaleFloodMemTargetMiB = 50
	// scaleFloodShareTarget is the delivered share the active bonds keep.
	scaleFloodShareTarget = 0.999
)

// scaleFloodConfig is what the parent tells the flood process.
type scaleFloodConfig struct {
	Target string  `json:"target"` // the concentrator, host:port
	PPS    float64 `json:"pps"`    // UDP datagrams per second
}

type scaleFloodMsg struct {
	Event string  `json:"event"`
	Sent  uint64  `json:"sent,omitempty"`
	Secs  float64 `json:"secs,omitempty"`
}

// scaleFlood is the flood step's result in results.json.
type scaleFlood struct {
	Bonds          int     `json:"bonds"`
	Source         string  `json:"source"`               // where the spoofed packets came from
	OfferedPPS     float64 `json:"offered_pps"`          // --flood
	FloodPPS       float64 `json:"flood_pps"`            // what the flood sent, datagrams per second
	ActiveMinShare float64 `json:"active_delivered_min"` // lowest delivered/sent of an active bond under the flood
	ActiveShare    float64 `json:"active_delivered"`     // all active bonds' delivered/sent
	NewEdgeFirstS  float64 `json:"new_edge_connect_s"`   // a new edge's first path up; −1: not within 30 s
	NewEdgeBothS   float64 `json:"new_edge_both_s"`      // and both paths
	RSSGrowthMiB   float64 `json:"rss_growth_mib"`       // the node's peak VmRSS during the flood less before it
	// LiveGrowthMiB is the node's peak live heap (what the collector's
	// last mark found reachable, runtime/metrics /gc/heap/live:bytes)
	// during the flood less before it: the state kept, without the
	// garbage that RSSGrowthMiB also holds until the next collection.
	LiveGrowthMiB  float64 `json:"live_heap_growth_mib"`
	Retries        uint64  `json:"retries"` // Initials the node answered with a Retry
	Busy           uint64  `json:"busy"`    // and refused over its rate (node, source)
	SourceRate     uint64  `json:"source_rate"`
	HandshakeFails uint64  `json:"handshake_failed"` // connections that never completed
	CPUPct         float64 `json:"cpu_pct"`          // the node's CPU during the flood, % of one core
	LoadAvg        string  `json:"load_avg"`
}

// runScaleFloodChild runs the flood process's side.
func runScaleFloodChild(cfg string, in io.Reader, out io.Writer) error {
	var c scaleFloodConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		return err
	}
	flights, err := tunnel.InitialFlights(context.Background(), min(scaleFloodFlightsMax, max(50, int(c.PPS))), "concentrator.scale")
	if err != nil {
		return err
	}
	target, err := net.ResolveUDPAddr("udp", c.Target)
	if err != nil {
		return err
	}
	var socks []*net.UDPConn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	for k := range scaleFloodSources {
		a := netip.AddrFrom4([4]byte{127, 200, byte((k + 1) >> 8), byte(k + 1)})
		s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		if err != nil {
			return err
		}
		socks = append(socks, s)
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(scaleFloodMsg{Event: "ready"}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() && sc.Text() != "go" {
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent uint64
	start := time.Now()
	wg.Go(func() {
		k := 0
		for !stop.Load() {
			due := uint64(time.Since(start).Seconds() * c.PPS)
			for sent < due {
				f := flights[k%len(flights)]
				s := socks[k%len(socks)]
				for _, p := range f {
					s.WriteToUDP(p, target) // errors (a full buffer) are the sender's loss
					sent++
				}
				k++
			}
			time.Sleep(time.Millisecond)
		}
	})
	for sc.Scan() && sc.Text() != "stop" {
	}
	stop.Store(true)
	wg.Wait()
	return enc.Encode(scaleFloodMsg{Event: "flooded", Sent: sent, Secs: time.Since(start).Seconds()})
}

// floodEnv is what the flood step needs from its scale step.
type floodEnv struct {
	conc   *tunnel.Concentrator
	edges  *scaleEdgeProcs
	active []int
	// traffic runs the active bonds' traffic once and returns the lowest
	// and the overall delivered share.
	traffic func() (minShare, share float64, err error)
}

// runScaleFlood runs the flood step of n bonds.
func runScaleFlood(ctx context.Context, o Options, n int, env floodEnv, out io.Writer) (scaleFlood, error) {
	fl := scaleFlood{Bonds: n, OfferedPPS: o.ScaleFlood, NewEdgeFirstS: -1, NewEdgeBothS: -1,
		Source: fmt.Sprintf("loopback: %d addresses 127.200.0.0/16 that never answer (no network namespace between sender and node)", scaleFloodSources)}
	cfg, _ := json.Marshal(scaleFloodConfig{Target: env.conc.Addr().String(), PPS: o.ScaleFlood})
	kid, err := startScaleChild(ctx, scaleFloodEnv, string(cfg))
	if err != nil {
		return fl, err
	}
	defer kid.stop()
	if _, err := kid.nextEvent("ready", 60*time.Second); err != nil {
		return fl, err
	}
	base := sampleMemory()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live) // sampleMemory's collection just marked
	baseLive := live[0].Value.Uint64()
	h0, d0 := env.conc.Handshakes(), env.conc.TransportDropCounts()
	var peak, peakLive atomic.Uint64
	sctx, scancel := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Go(func() {
		for sctx.Err() == nil {
			if r := readVmRSS(); r > peak.Load() {
				peak.Store(r)
			}
			metrics.Read(live)
			if l := live[0].Value.Uint64(); l > peakLive.Load() {
				peakLive.Store(l)
			}
			sleepUntil(sctx, time.Now().Add(50*time.Millisecond), nil)
		}
	})
	c0, w0 := cpuTime(), time.Now()
	if err := kid.send("go"); err != nil {
		scancel()
		return fl, err
	}
	err = func() error {
		if err := sleepUntil(ctx, time.Now().Add(time.Second), nil); err != nil { // the flood under way
			return err
		}
		if err := env.edges.kids[0].send("late"); err != nil {
			return err
		}
		var m scaleChildMsg
		line, err := env.edges.kids[0].nextEvent("late", 40*time.Second)
		if err != nil {
			return err
		}
		json.Unmarshal([]byte(line), &m)
		fl.NewEdgeFirstS, fl.NewEdgeBothS = m.FirstS, m.BothS
		fl.ActiveMinShare, fl.ActiveShare, err = env.traffic()
		return err
	}()
	cpu, wall := cpuTime()-c0, time.Since(w0)
	kid.send("stop")
	scancel()
	swg.Wait()
	if err != nil {
		return fl, err
	}
	line, err := kid.nextEvent("flooded", 30*time.Second)
	if err != nil {
		return fl, err
	}
	var fm scaleFloodMsg
	json.Unmarshal([]byte(line), &fm)
	if fm.Secs > 0 {
		fl.FloodPPS = float64(fm.Sent) / fm.Secs
	}
	h1, d1 := env.conc.Handshakes(), env.conc.TransportDropCounts()
	fl.Retries, fl.Busy, fl.SourceRate = h1.Retries-h0.Retries, h1.Busy-h0.Busy, h1.SourceRate-h0.SourceRate
	fl.HandshakeFails = d1["handshake_failed"] - d0["handshake_failed"]
	fl.RSSGrowthMiB = (float64(peak.Load()) - float64(base.rss)) / mib
	fl.LiveGrowthMiB = (float64(peakLive.Load()) - float64(baseLive)) / mib
	fl.CPUPct = 100 * float64(cpu) / float64(wall)
	fl.LoadAvg = loadAvg()
	fmt.Fprintf(out, "  flood at %d bonds: %.0f spoofed Initials/s (offered %.0f); active bonds delivered %.4f (lowest %.4f); a new edge connected in %.3f s (both paths %.3f s); node RSS +%.1f MiB (live heap +%.1f MiB), CPU %.0f %%; retries %d, busy %d, source_rate %d, failed handshakes %d; load %s\n",
		n, fl.FloodPPS, fl.OfferedPPS, fl.ActiveShare, fl.ActiveMinShare, fl.NewEdgeFirstS, fl.NewEdgeBothS, fl.RSSGrowthMiB, fl.LiveGrowthMiB, fl.CPUPct,
		fl.Retries, fl.Busy, fl.SourceRate, fl.HandshakeFails, fl.LoadAvg)
	return fl, nil
}

// RunScaleChildren runs a child process of the scale scenario when this
// process was started as one (the environment says which: edges,
// concentrator or flood) and then exits; otherwise it returns at once.
// Call it first thing in main (and in TestMain of tests that run the
// scale scenario).
func RunScaleChildren() {
	for env, run := range map[string]func(string, io.Reader, io.Writer) error{
		scaleChildEnv: scaleEdgesMain, scaleFloodEnv: runScaleFloodChild, scaleConcEnv: runScaleConcChild,
	} {
		cfg, ok := os.LookupEnv(env)
		if !ok {
			continue
		}
		if err := run(cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench scale child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}
