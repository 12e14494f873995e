package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/tunnel"
)

// frameBound is what an ideal sender loses of S2's video over the
// Starlink path alone in one run (seed), frames: the floor under
// single-starlink's frames lost, which no scheduler, rate controller,
// FEC or retransmission goes below on that link.
type frameBound struct {
	Seed   uint64 `json:"seed"`
	Frames int    `json:"frames"`
	// LostPaced is the frames the ideal sender loses when each must
	// leave it within bondd's send-queue limit (200 ms) and the link's
	// queue stays empty; Lost when a frame may also wait out the link's
	// drop-tail queue (100 ms more).
	LostPaced int `json:"lost_paced"`
	Lost      int `json:"lost"`
}

// boundBin is the time step of satFrameBound.
const boundBin = 5 * time.Millisecond

// satFrameBound returns what an ideal sender loses of a run of o's video
// over S2's Starlink path (sc's path s2Sat, edge→concentrator, relay
// seeded o.Seed + its index), when each frame must leave the sender within
// tunnel.DefaultMaxQueueDelay (LostPaced) or may also wait out the link's
// drop-tail queue (Lost). The sender is a fluid server at the link's
// capacity, with its outages and less its trace loss (an ideal code or
// retransmission recovers exactly the lost share), serving frames
// earliest deadline first (frame i is captured at o.Settle + i·20 ms of
// model time) and giving up on a frame as soon as the capacity left
// before its deadline cannot finish it, so that a hopeless frame takes
// nothing from the next. One-way delay is left out: it delays every frame
// alike. The model time is alignLEO's (the trace position at traffic time
// t is the scenario's offset + 1 min + t), with the outages on the same
// seconds of the 15-s cycle as in the run. It returns an error for a
// scenario without the Starlink path or with a link CapacityBits refuses.
func satFrameBound(sc emu.Scenario, o Options) (frameBound, error) {
	fb := frameBound{Seed: o.Seed}
	idx := slices.IndexFunc(sc.Paths, func(p emu.PathModel) bool { return p.Name == s2Sat })
	if idx < 0 {
		return fb, fmt.Errorf("no path %q in the scenario", s2Sat)
	}
	cfg := sc.Paths[idx].Up
	cfg.WallClock = false
	cfg.TraceOffset += time.Minute
	seed := emu.RelayLinkSeed(o.Seed+uint64(idx), emu.Up)
	paced, queued := tunnel.DefaultMaxQueueDelay, tunnel.DefaultMaxQueueDelay+cfg.QueueDelay
	capBits := make([]float64, int((o.Duration+queued+boundBin-1)/boundBin))
	for k := range capBits {
		from := o.Settle + time.Duration(k)*boundBin
		c, err := emu.CapacityBits(cfg, seed, from, from+boundBin)
		if err != nil {
			return fb, err
		}
		if s := cfg.Series; s != nil && len(s.Loss) > 0 {
			c *= 1 - s.Loss[int(((from+cfg.TraceOffset)/s.Interval)%time.Duration(len(s.Loss)))]
		}
		capBits[k] = c
	}
	sched := videoSchedule(o.Duration)
	fb.Frames = len(sched)
	fb.LostPaced = edfLost(capBits, sched, paced)
	fb.Lost = edfLost(capBits, sched, queued)
	return fb, nil
}

// edfLost returns the frames of sched that the fluid server of
// satFrameBound, with capBits bits per boundBin, cannot finish within
// wait of their capture.
func edfLost(capBits []float64, sched []videoFrame, wait time.Duration) (lost int) {
	left := make([]float64, len(sched)) // bits still to serve; < 0: done or given up
	for i, f := range sched {
		left[i] = float64(f.bytes+f.packets*boundPacketOverhead) * 8
	}
	upTo := make([]float64, len(capBits)+1) // upTo[j]: the bits of bins 0..j-1
	for j, c := range capBits {
		upTo[j+1] = upTo[j] + c
	}
	next := 0 // the first frame neither done nor given up
	for k := range capBits {
		now, c := time.Duration(k)*boundBin, capBits[k]
		for i := next; i < len(sched) && c > 0; i++ {
			at := time.Duration(i) * videoFrameInterval
			if at > now {
				break
			}
			if left[i] < 0 {
				continue
			}
			due := min(int((at+wait)/boundBin), len(capBits)) // the first bin past the deadline
			room := 0.0                                       // what is left of this bin and the bins before due
			if k < due {
				room = c + upTo[due] - upTo[k+1]
			}
			if room < left[i] {
				left[i] = -1
				lost++
				continue
			}
			s := min(c, left[i])
			c -= s
			if left[i] -= s; left[i] <= 0 {
				left[i] = -1
			}
		}
		for next < len(sched) && left[next] < 0 {
			next++
		}
	}
	for _, l := range left[next:] { // due after the last bin with capacity
		if l > 0 {
			lost++
		}
	}
	return lost
}

// boundPacketOverhead is what a video packet carries on the link besides
// its RTP payload, bytes: the inner packet's RTP, UDP and IPv4 headers,
// bondd's DATA header with FEC fields (tunnel.HeaderBudget), a QUIC short
// header with its AEAD tag and DATAGRAM frame header (about 30), and the
// outer UDP and IPv4 headers.
const boundPacketOverhead = 12 + 8 + 20 + tunnel.HeaderBudget + 30 + 8 + 20
