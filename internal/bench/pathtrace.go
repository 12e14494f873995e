package bench

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/tunnel"
)

// The per-path time series of the capacity and S2 benches (paths.csv): each path of the
// edge sampled every pathTraceStep during the traffic, beside the
// capacity its emulated link had over the same interval. It shows what
// held a path below its link: a window that loss cut (cwnd over sRTT near
// the path's rate, QUIC losses at the link's dips), the rate control's
// target, or a DEGRADED status the scheduler kept traffic
// from; and what the link dropped of what the path sent, and why.

// pathTraceStep is the sampling interval of paths.csv.
const pathTraceStep = 250 * time.Millisecond

// pathSample is one path over one sampling interval: a row of paths.csv.
type pathSample struct {
	Seed          uint64
	Config        string
	T             float64 // s from the traffic's start to the end of the interval
	Path          string
	Status        string // ACTIVE, DEGRADED or UNAVAILABLE at the end
	LinkMbps      float64
	TxMbps        float64 // bytes bondd handed the path's connection over the interval
	CwndBytes     int     // the connection's congestion window at the end
	InflightBytes int
	SRTTms        float64
	MinRTTms      float64
	Lost          uint64 // QUIC packets declared lost over the interval
	QueueLen      int    // frames in the path's send queue at the end
	QueueDrops    uint64 // frames dropped from that queue over the interval (full, expired, deadline)
	// The emulated link's drops of the path's packets (edge→concentrator)
	// over the interval: its drop-tail queue full, its random loss, its
	// outages.
	LinkQueueDrops, LinkLoss, LinkOutage uint64
	TargetMbps                           float64 // the rate control's target at the end; 0 without rate control
	// The rate estimator's view at the end (0 without rate control): the
	// smoothed rate the receiver got, its max_bw, the queueing delay over
	// the base, the receiver-seen loss, and its back-offs over the interval.
	DeliveryMbps, CapacityMbps float64
	QueueDelayMs               float64
	Loss                       float64
	Overuses                   uint64
}

// pathSamples returns the rows of the interval dt between two snapshots of
// the edge, a and b, each path matched by name; link maps a path's name to
// its link's capacity over the interval, Mbit/s, and linkDrops to its link's
// counters (edge→concentrator) at a and at b. A path missing from a
// counts from zero.
func pathSamples(a, b tunnel.BondStats, dt time.Duration, link map[string]float64, linkDrops map[string][2]emu.DirStats) []pathSample {
	before := make(map[string]*tunnel.PathStats, len(a.Paths))
	for i := range a.Paths {
		before[a.Paths[i].Name] = &a.Paths[i]
	}
	secs := dt.Seconds()
	var rows []pathSample
	for _, p := range b.Paths {
		var tx, lost, drops, overuses uint64
		if q := before[p.Name]; q != nil {
			tx, lost, drops = q.TxBytes, q.PacketsLost, queueDrops(q)
			if q.Rate != nil {
				overuses = q.Rate.Overuses
			}
		}
		s := pathSample{Path: p.Name, Status: p.Status, LinkMbps: link[p.Name],
			CwndBytes: p.CongestionWindow, InflightBytes: p.BytesInFlight,
			SRTTms: float64(p.SmoothedRTT) / 1e6, MinRTTms: float64(p.MinRTT) / 1e6,
			Lost: sub(p.PacketsLost, lost), QueueLen: p.QueueLen, QueueDrops: sub(queueDrops(&p), drops)}
		if d, ok := linkDrops[p.Name]; ok {
			s.LinkQueueDrops, s.LinkLoss, s.LinkOutage = sub(d[1].DropQueue, d[0].DropQueue), sub(d[1].DropLoss, d[0].DropLoss), sub(d[1].DropOutage, d[0].DropOutage)
		}
		if secs > 0 {
			s.TxMbps = float64(sub(p.TxBytes, tx)) * 8 / secs / 1e6
		}
		if r := p.Rate; r != nil && r.Active {
			s.TargetMbps, s.DeliveryMbps, s.CapacityMbps = float64(r.TargetBps)/1e6, float64(r.DeliveryBps)/1e6, float64(r.CapacityBps)/1e6
			s.QueueDelayMs, s.Loss, s.Overuses = float64(r.QueueDelay)/1e6, r.Loss, sub(r.Overuses, overuses)
		}
		rows = append(rows, s)
	}
	return rows
}

// queueDrops is the frames a path dropped from its send queue: full,
// expired or past their deadline.
func queueDrops(p *tunnel.PathStats) uint64 {
	return p.Drops[tunnel.DropQueueFull] + p.Drops[tunnel.DropExpired] + p.Drops[tunnel.DropDeadline]
}

// sub is b − a for counters, 0 if a counter went back (a connection restarted).
func sub(b, a uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

// pathTracer samples a bed's edge every pathTraceStep until finished.
type pathTracer struct {
	rows []pathSample // written by the sampling goroutine until done is closed
	stop context.CancelFunc
	done chan struct{}
}

// tracePaths starts sampling bed's edge, whose traffic started at start;
// sc is the bed's scenario with relay i seeded seed + i, for the links'
// capacity. Stop it with finish, which returns the rows (Seed and Config
// left for the caller).
func tracePaths(ctx context.Context, bed *demo.Bed, sc emu.Scenario, seed uint64, start time.Time) *pathTracer {
	ctx, cancel := context.WithCancel(ctx)
	t := &pathTracer{stop: cancel, done: make(chan struct{})}
	linkStats := func() []emu.DirStats {
		out := make([]emu.DirStats, len(bed.Relays))
		for i, r := range bed.Relays {
			out[i] = r.Stats().Up
		}
		return out
	}
	last, prev, prevLinks := time.Now(), bed.Edge.Stats(), linkStats()
	go func() {
		defer close(t.done)
		every(ctx, pathTraceStep, func() {
			now, cur, links := time.Now(), bed.Edge.Stats(), linkStats()
			link := map[string]float64{}
			drops := map[string][2]emu.DirStats{}
			caps, err := windowCapacity(sc, seed, last.Sub(bed.Created), now.Sub(bed.Created))
			for i, p := range sc.Paths {
				if err == nil {
					link[p.Name] = caps[i]
				}
				if i < len(links) {
					drops[p.Name] = [2]emu.DirStats{prevLinks[i], links[i]}
				}
			}
			rows := pathSamples(prev, cur, now.Sub(last), link, drops)
			for i := range rows {
				rows[i].T = now.Sub(start).Seconds()
			}
			t.rows = append(t.rows, rows...)
			last, prev, prevLinks = now, cur, links
		})
	}()
	return t
}

// finish stops the sampling and returns the rows.
func (t *pathTracer) finish() []pathSample {
	t.stop()
	<-t.done
	return t.rows
}

// pathTraceHeader is paths.csv's first line.
var pathTraceHeader = []string{"seed", "config", "t_s", "path", "status", "link_mbps", "tx_mbps",
	"cwnd_bytes", "inflight_bytes", "srtt_ms", "min_rtt_ms", "quic_lost", "queue_len", "queue_drops", "target_mbps",
	"delivery_mbps", "max_bw_mbps", "queue_delay_ms", "rx_loss", "overuses", "link_queue_drops", "link_loss", "link_outage"}

// writePathTrace writes rows to dir/paths.csv.
func writePathTrace(dir string, rows []pathSample) error {
	f, err := os.Create(filepath.Join(dir, "paths.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(pathTraceHeader)
	ff := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, r := range rows {
		w.Write([]string{strconv.FormatUint(r.Seed, 10), r.Config, ff(r.T), r.Path, r.Status,
			ff(r.LinkMbps), ff(r.TxMbps), strconv.Itoa(r.CwndBytes), strconv.Itoa(r.InflightBytes), ff(r.SRTTms), ff(r.MinRTTms),
			strconv.FormatUint(r.Lost, 10), strconv.Itoa(r.QueueLen), strconv.FormatUint(r.QueueDrops, 10), ff(r.TargetMbps),
			ff(r.DeliveryMbps), ff(r.CapacityMbps), ff(r.QueueDelayMs), strconv.FormatFloat(r.Loss, 'f', 4, 64), strconv.FormatUint(r.Overuses, 10),
			strconv.FormatUint(r.LinkQueueDrops, 10), strconv.FormatUint(r.LinkLoss, 10), strconv.FormatUint(r.LinkOutage, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
