package fec

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// intervalWeights are the weights w_0 … w_7 of RFC 5348 §5.4, the most
// recent loss interval first.
var intervalWeights = [NIntervals]float64{1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2}

// LossIntervals estimates the loss rate p_i of one path with the
// loss-interval method of TFRC (RFC 5348 §5.4), driven by QUIC's loss
// detection (RFC 9002) as paper 1 §4.3 does.
//
// A loss interval is the number of packets sent on the path from the start
// of one loss event to the start of the next. Losses reported within one RTT
// of the first loss of the current event belong to that event (RFC 5348
// §5.2, with detection times standing in for send times). The estimator
// keeps the last NIntervals closed intervals I_1 (newest) … I_8 and the open
// interval I_0, the packets sent since the current event began.
//
// Rate is the paper's estimate: the loss event rate from the closed
// intervals, p = W_tot / Σ w_{i-1}·I_i, updated only when a loss event
// begins or grows, and kept unchanged while no new event arrives.
// DiscountedRate is the full RFC 5348 §5.4 rule, which also lets a long
// loss-free open interval lower the estimate. PacketRate counts lost packets
// rather than events. All three are 0 before the first loss.
//
// Concurrency: OnSent is one atomic add (the sender's goroutine); OnLoss
// takes a small mutex (quic-go's tracer goroutine); Rate and PacketRate are
// one atomic load and never block. The zero value is ready to use; a
// LossIntervals must not be copied after first use.
type LossIntervals struct {
	open    atomic.Uint64 // I_0: packets sent since the current event began
	rate    atomic.Uint64 // float64 bits of Rate
	pktRate atomic.Uint64 // float64 bits of PacketRate

	mu sync.Mutex
	// mu guards all following.
	hist       [NIntervals]lossInterval // ring of closed intervals; hist[head] is the newest
	head       int
	n          int // closed intervals held, ≤ NIntervals
	inEvent    bool
	eventStart time.Time
	events     uint64
}

// lossInterval is one closed interval: the packets sent in it and the
// packets lost in the loss event that ended it.
type lossInterval struct {
	sent, lost uint64
}

// OnSent counts n packets sent on the path. It never blocks and does not
// allocate.
func (l *LossIntervals) OnSent(n int) {
	if n > 0 {
		l.open.Add(uint64(n))
	}
}

// OnLoss records one packet declared lost at now, with rtt the path's
// smoothed RTT. A loss more than rtt after the first loss of the current
// event starts a new event: the open interval closes (at least one packet
// long) and both rates are recomputed. Otherwise the loss joins the current
// event, which leaves Rate unchanged and raises PacketRate. With rtt ≤ 0
// only losses reported at the same instant share an event. It does not
// allocate.
func (l *LossIntervals) OnLoss(now time.Time, rtt time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inEvent && now.Sub(l.eventStart) <= rtt {
		l.hist[l.head].lost++
		l.publishLocked()
		return
	}
	sent := l.open.Swap(0)
	if sent == 0 {
		sent = 1 // the lost packet itself was sent
	}
	l.head = (l.head + 1) % NIntervals
	l.hist[l.head] = lossInterval{sent: sent, lost: 1}
	l.n = min(l.n+1, NIntervals)
	l.inEvent, l.eventStart = true, now
	l.events++
	l.publishLocked()
}

// publishLocked recomputes Rate and PacketRate from the closed intervals.
func (l *LossIntervals) publishLocked() {
	var iTot, wTot, lost float64
	for i := range l.n {
		h := l.hist[(l.head-i+NIntervals)%NIntervals]
		w := intervalWeights[i]
		iTot += w * float64(h.sent)
		wTot += w
		lost += w * float64(h.lost)
	}
	l.rate.Store(math.Float64bits(wTot / iTot))
	l.pktRate.Store(math.Float64bits(min(1, lost/iTot)))
}

// Rate returns the loss event rate p = 1/I_mean over the closed intervals,
// in [0, 1]: the value as of the latest loss event, kept while no new event
// arrives (paper 1 §4.3). It is one atomic load.
func (l *LossIntervals) Rate() float64 {
	return math.Float64frombits(l.rate.Load())
}

// PacketRate returns the fraction of packets lost over the same closed
// intervals and weights as Rate, Σ w·lost / Σ w·sent, in [0, 1]. It equals
// Rate when every event loses one packet and exceeds it by the mean burst
// length otherwise; it is the better p_i for FEC on bursty paths (see
// docs/fec.md). It is one atomic load.
func (l *LossIntervals) PacketRate() float64 {
	return math.Float64frombits(l.pktRate.Load())
}

// UpperRate returns Rate once the path has had a loss event, and before it
// an upper bound of the loss rate from the packets sent without a loss:
// after n packets and no loss, p ≤ 3/n with 95 % confidence (the "rule of
// three": Hanley and Lippman-Hand, "If nothing goes wrong, is everything
// all right?", JAMA 249(13), 1983), here 3/(n+3), which is 1 before the
// first packet. A path that has sent little is not assumed lossless. It
// is two atomic loads.
func (l *LossIntervals) UpperRate() float64 {
	if r := l.Rate(); r > 0 {
		return r
	}
	return 3 / (float64(l.open.Load()) + 3)
}

// DiscountedRate returns the loss event rate of RFC 5348 §5.4 in full:
// I_mean = max(I_tot0, I_tot1)/W_tot, where I_tot0 also weighs the open
// interval I_0 (packets sent since the current event began) and I_tot1 uses
// only closed ones. Unlike Rate it falls as loss-free packets accumulate.
// It takes the mutex.
func (l *LossIntervals) DiscountedRate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return 0
	}
	// With k closed intervals: I_tot0 = Σ_{i=0}^{k-1} w_i·I_i,
	// I_tot1 = Σ_{i=1}^{k} w_{i-1}·I_i, W_tot = Σ_{i=0}^{k-1} w_i.
	iTot0 := float64(l.open.Load())
	var iTot1, wTot float64
	for i := range l.n {
		h := float64(l.hist[(l.head-i+NIntervals)%NIntervals].sent)
		iTot1 += intervalWeights[i] * h
		wTot += intervalWeights[i]
		if i+1 < l.n {
			iTot0 += intervalWeights[i+1] * h
		}
	}
	return wTot / max(iTot0, iTot1)
}

// Events returns the number of loss events so far.
func (l *LossIntervals) Events() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events
}

// Reset forgets all history, as for a re-dialled path.
func (l *LossIntervals) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open.Store(0)
	l.rate.Store(0)
	l.pktRate.Store(0)
	l.hist = [NIntervals]lossInterval{}
	l.head, l.n, l.inEvent, l.events = 0, 0, false, 0
}
