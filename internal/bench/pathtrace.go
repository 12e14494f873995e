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
// target, too few lanes, or a DEGRADED status the scheduler kept traffic
// from.

// pathTraceStep is the sampling interval of paths.csv.
const pathTraceStep = 250 * time.Millisecond

// pathSample is one path over one sampling interval: a row of paths.csv.
type pathSample struct {
	Seed          uint64
	Config        string
	T             float64 // s from the traffic's start to the end of the interval
	Path          string
	Status        string // ACTIVE, DEGRADED or UNAVAILABLE at the end
	Lanes         int    // live QUIC connections at the end
	LinkMbps      float64
	TxMbps        float64 // bytes bondd handed the path's lanes over the interval
	CwndBytes     int     // congestion windows summed over the lanes, at the end
	InflightBytes int
	SRTTms        float64
	MinRTTms      float64
	Lost          uint64  // QUIC packets declared lost over the interval
	QueueLen      int     // frames in the path's send queue at the end
	QueueDrops    uint64  // frames dropped from that queue over the interval (full, expired, deadline)
	TargetMbps    float64 // the rate control's target at the end; 0 without rate control
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
// its link's capacity over the interval, Mbit/s. A path missing from a
// counts from zero.
func pathSamples(a, b tunnel.BondStats, dt time.Duration, link map[string]float64) []pathSample {
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
		s := pathSample{Path: p.Name, Status: p.Status, Lanes: len(p.Lanes), LinkMbps: link[p.Name],
			CwndBytes: p.CongestionWindow, InflightBytes: p.BytesInFlight,
			SRTTms: float64(p.SmoothedRTT) / 1e6, MinRTTms: float64(p.MinRTT) / 1e6,
			Lost: sub(p.PacketsLost, lost), QueueLen: p.QueueLen, QueueDrops: sub(queueDrops(&p), drops)}
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

// sub is b − a for counters, 0 if a counter went back (a lane restarted).
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
	last, prev := time.Now(), bed.Edge.Stats()
	go func() {
		defer close(t.done)
		every(ctx, pathTraceStep, func() {
			now, cur := time.Now(), bed.Edge.Stats()
			link := map[string]float64{}
			if caps, err := windowCapacity(sc, seed, last.Sub(bed.Created), now.Sub(bed.Created)); err == nil {
				for i, p := range sc.Paths {
					link[p.Name] = caps[i]
				}
			}
			rows := pathSamples(prev, cur, now.Sub(last), link)
			for i := range rows {
				rows[i].T = now.Sub(start).Seconds()
			}
			t.rows = append(t.rows, rows...)
			last, prev = now, cur
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
var pathTraceHeader = []string{"seed", "config", "t_s", "path", "status", "lanes", "link_mbps", "tx_mbps",
	"cwnd_bytes", "inflight_bytes", "srtt_ms", "min_rtt_ms", "quic_lost", "queue_len", "queue_drops", "target_mbps",
	"delivery_mbps", "max_bw_mbps", "queue_delay_ms", "rx_loss", "overuses"}

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
		w.Write([]string{strconv.FormatUint(r.Seed, 10), r.Config, ff(r.T), r.Path, r.Status, strconv.Itoa(r.Lanes),
			ff(r.LinkMbps), ff(r.TxMbps), strconv.Itoa(r.CwndBytes), strconv.Itoa(r.InflightBytes), ff(r.SRTTms), ff(r.MinRTTms),
			strconv.FormatUint(r.Lost, 10), strconv.Itoa(r.QueueLen), strconv.FormatUint(r.QueueDrops, 10), ff(r.TargetMbps),
			ff(r.DeliveryMbps), ff(r.CapacityMbps), ff(r.QueueDelayMs), strconv.FormatFloat(r.Loss, 'f', 4, 64), strconv.FormatUint(r.Overuses, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
