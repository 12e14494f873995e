package demo

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"
)

// The demo's load: a constant-rate UDP flow like iperf2's UDP test. Every
// payload starts with a sequence number and the send time, so the receiver
// measures one-way delay and loss per packet (sender and receiver share one
// clock: they run in one process).

const (
	PacketBytes    = 1200             // whole inner IP packet, bytes
	demoPayloadLen = PacketBytes - 28 // minus IPv4 and UDP headers
	demoPort       = 9000
)

// Port is the UDP port of the testbeds' flow at both ends: Recv listens on
// ConcAddr:Port.
const Port = demoPort

// demoFlow collects what the receiver saw. Safe for concurrent use.
type demoFlow struct {
	mu       sync.Mutex
	seen     map[uint64]bool
	owdUs    []float64 // one-way delay of each first copy, µs
	bytes    int
	sent     uint64
	dupes    uint64
	firstRcv time.Time
}

func newDemoFlow() *demoFlow { return &demoFlow{seen: map[uint64]bool{}} }

// sendFlow sends rateMbps of demoPayloadLen-byte payloads through send for
// duration, paced against the clock (no drift), and returns the count sent.
func sendFlow(ctx context.Context, rateMbps float64, duration time.Duration, fs *demoFlow, send func([]byte) error) {
	interval := time.Duration(float64(PacketBytes*8) / (rateMbps * 1e6) * float64(time.Second))
	payload := make([]byte, demoPayloadLen)
	start := time.Now()
	for seq := uint64(0); ; seq++ {
		at := start.Add(time.Duration(seq) * interval)
		if at.Sub(start) >= duration {
			return
		}
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		binary.BigEndian.PutUint64(payload[0:], seq)
		binary.BigEndian.PutUint64(payload[8:], uint64(time.Now().UnixNano()))
		if send(payload) == nil {
			fs.mu.Lock()
			fs.sent++
			fs.mu.Unlock()
		}
	}
}

// record notes one received payload.
func (fs *demoFlow) record(payload []byte, now time.Time) {
	if len(payload) < 16 {
		return
	}
	seq := binary.BigEndian.Uint64(payload)
	sentAt := int64(binary.BigEndian.Uint64(payload[8:]))
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.seen[seq] {
		fs.dupes++
		return
	}
	fs.seen[seq] = true
	fs.owdUs = append(fs.owdUs, float64(now.UnixNano()-sentAt)/1e3)
	fs.bytes += len(payload)
}

// owdSummary is the one-way delay distribution, ms.
type owdSummary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
}

// summary returns packets sent and received, the delay summary (ms) and the
// goodput (Mbit/s over duration).
func (fs *demoFlow) summary(duration time.Duration) (sent, received uint64, owd owdSummary, goodput float64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d := slices.Clone(fs.owdUs)
	slices.Sort(d)
	if len(d) > 0 {
		var sum float64
		for _, v := range d {
			sum += v
		}
		q := func(p float64) float64 { return d[min(len(d)-1, int(math.Ceil(p*float64(len(d))))-1)] / 1e3 }
		owd = owdSummary{Mean: sum / float64(len(d)) / 1e3, P50: q(0.50), P95: q(0.95), P99: q(0.99)}
	}
	return fs.sent, uint64(len(fs.seen)), owd, float64(fs.bytes*8) / duration.Seconds() / 1e6
}
