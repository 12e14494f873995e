package emu

// The relay's counters: DirStats and Stats, the atomics behind them, and
// the histogram of release lateness.

import (
	"sync/atomic"
	"time"
)

// DirStats are the counters of one relay direction. Packets counts every
// datagram read for the direction; each ends up in exactly one of
// Delivered, the Drop counters, or Scheduled (still waiting).
type DirStats struct {
	Packets, Bytes            uint64 // datagrams and payload bytes read
	Delivered, DeliveredBytes uint64 // datagrams and payload bytes written on
	DropLoss                  uint64 // random loss (model)
	DropQueue                 uint64 // drop-tail queue full (model)
	DropOutage                uint64 // scheduled outage (model) or SetDown
	DropTooBig                uint64 // IP packet above the SetMaxPacket limit (an MTU black hole)
	DropOther                 uint64 // relay limits, unknown sources, write errors
	Scheduled                 int    // waiting for their release time now
	// Lateness of actual release (after the write returned) versus the
	// model's release time, over all delivered packets. Resolution 5 µs up
	// to 2 ms, then powers of two.
	LateP50, LateP99, LateMax time.Duration
}

// Stats is a snapshot of a relay's counters.
type Stats struct {
	Up, Down DirStats
	Clients  int // open client sessions
}

// dirCounters are the atomics behind DirStats.
type dirCounters struct {
	packets, bytes            atomic.Uint64
	delivered, deliveredBytes atomic.Uint64
	loss, queue, outage       atomic.Uint64
	tooBig                    atomic.Uint64
	other                     atomic.Uint64
	late                      lateHist
}

// foreign counts a datagram that is read but not relayed (unknown source,
// no session available).
func (c *dirCounters) foreign(n int) {
	c.packets.Add(1)
	c.bytes.Add(uint64(n))
	c.other.Add(1)
}

func (c *dirCounters) drop(d Drop) {
	switch d {
	case DropLoss:
		c.loss.Add(1)
	case DropQueue:
		c.queue.Add(1)
	case DropOutage:
		c.outage.Add(1)
	default:
		c.other.Add(1)
	}
}

func (c *dirCounters) snapshot() DirStats {
	s := DirStats{
		Packets:        c.packets.Load(),
		Bytes:          c.bytes.Load(),
		Delivered:      c.delivered.Load(),
		DeliveredBytes: c.deliveredBytes.Load(),
		DropLoss:       c.loss.Load(),
		DropQueue:      c.queue.Load(),
		DropOutage:     c.outage.Load(),
		DropTooBig:     c.tooBig.Load(),
		DropOther:      c.other.Load(),
	}
	s.LateP50, s.LateP99, s.LateMax = c.late.quantiles()
	return s
}

// lateHist is a histogram of release lateness: 400 linear buckets of 5 µs
// up to 2 ms, then 16 buckets doubling from 2 ms (the last one open).
// Written by one goroutine, read by any.
type lateHist struct {
	b   [lateLinear + lateLog]atomic.Uint64
	max atomic.Int64
}

const (
	lateStep   = 5 * time.Microsecond
	lateLinear = 400
	lateLog    = 16
)

func (h *lateHist) add(d time.Duration) {
	d = max(d, 0)
	if int64(d) > h.max.Load() {
		h.max.Store(int64(d))
	}
	i := int(d / lateStep)
	if i >= lateLinear {
		i = lateLinear
		for lim := 2 * lateLinear * lateStep; d >= lim && i < lateLinear+lateLog-1; lim *= 2 {
			i++
		}
	}
	h.b[i].Add(1)
}

// upper returns the upper edge of bucket i.
func (h *lateHist) upper(i int) time.Duration {
	if i < lateLinear {
		return time.Duration(i+1) * lateStep
	}
	return lateLinear * lateStep << (i - lateLinear + 1)
}

// quantiles returns p50 and p99 (upper bucket edges, capped at the
// maximum) and the maximum.
func (h *lateHist) quantiles() (p50, p99, mx time.Duration) {
	var counts [lateLinear + lateLog]uint64
	var total uint64
	for i := range h.b {
		counts[i] = h.b[i].Load()
		total += counts[i]
	}
	mx = time.Duration(h.max.Load())
	if total == 0 {
		return 0, 0, 0
	}
	q := func(f float64) time.Duration {
		want := uint64(f*float64(total) + 0.5)
		want = max(want, 1)
		var c uint64
		for i, n := range counts {
			c += n
			if c >= want {
				return min(h.upper(i), mx)
			}
		}
		return mx
	}
	return q(0.50), q(0.99), mx
}
