package tunnel

import (
	"time"
)

// Resequencing at the receiver: the far half of per-flow sequencing
// (flowtag.go). Packets of one flow may take paths of different delay, and
// an FEC-reconstructed packet comes after the packets that completed its
// block, so a flow's packets reach the receiver out of order. For a flow
// the sender tagged, the receiver holds the packets behind a gap until the
// gap is filled (by a late original or an FEC reconstruction) or until the
// flow's wait bound passes, and then releases them in order, counting the
// sequence numbers it gave up on. Untagged packets, and the packets of
// every other flow, are never held.
//
// The wait bound adapts to the paths' delay spread: it is the larger of
// the caller's spread hint (setSpread, e.g. from per-path one-way delays),
// its retransmission hint (how late a resent packet comes) when that is
// within the flow's cap, and 5/4 of a slowly decaying maximum of the
// observed reordering delay,
// plus MinWait, capped by the flow's resequence_ms (its tag's WaitMs). The
// reordering delay is sampled as how long a filled gap was waited for, and
// as how late a packet came after its gap was given up (then wait +
// lateness); the maximum jumps up to a larger sample and decays by 1/256
// of the difference towards a smaller one, at most every reseqDecayEvery,
// so it grows at once and shrinks slowly, as RACK's reordering window does
// (RFC 8985 §6.2). Until reseqWarmup waits were seen, and without a
// hint, the bound is the cap.
//
// State is bounded per bond: at most Flows flows hold packets at once, each
// at most Window packets ahead of its oldest gap, and at most Packets
// packets and Bytes bytes are held in all. A packet that finds no room
// makes its flow give up its gaps up to it (counted in Overflow), so the
// flow goes on in order, skipping what is missing.

// Resequencer defaults.
const (
	DefaultReseqFlows   = 64      // flows holding packets at once
	DefaultReseqWindow  = 512     // packets a flow may run ahead of its first gap
	DefaultReseqPackets = 2048    // packets held per bond
	DefaultReseqBytes   = 2 << 20 // bytes of inner packets held per bond
	DefaultReseqMinWait = 2 * time.Millisecond
	// reseqResync: a packet further behind its flow's next sequence number
	// than this restarts the flow (its sender restarted it, and the
	// receiver did not see the flow idle long enough to forget it).
	reseqResync = 1 << (FlowSeqBits - 2)
	// reseqWarmup is how many gap-fill waits the adaptive bound needs
	// before it replaces the cap.
	reseqWarmup = 32
)

// ReseqOptions bounds the resequencer of one bond. The zero value is valid:
// each zero field takes its default.
type ReseqOptions struct {
	Flows       int           // flows holding packets at once; default DefaultReseqFlows
	Window      int           // packets per flow ahead of its first gap, rounded up to a power of two; default DefaultReseqWindow
	Packets     int           // packets held per bond; default DefaultReseqPackets
	Bytes       int           // bytes of inner packets held per bond; default DefaultReseqBytes
	DefaultWait time.Duration // cap for a tag whose WaitMs is 0; default DefaultResequenceWait
	MinWait     time.Duration // added to, and floor of, the adaptive bound; default DefaultReseqMinWait
}

func (o ReseqOptions) withDefaults() ReseqOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Flows, DefaultReseqFlows)
	def(&o.Window, DefaultReseqWindow)
	def(&o.Packets, DefaultReseqPackets)
	def(&o.Bytes, DefaultReseqBytes)
	o.Flows = min(o.Flows, MaxFlows)
	w := 2
	for w < min(o.Window, 1<<(FlowSeqBits-2)) {
		w <<= 1
	}
	o.Window = w
	if o.DefaultWait <= 0 {
		o.DefaultWait = DefaultResequenceWait
	}
	if o.MinWait <= 0 {
		o.MinWait = DefaultReseqMinWait
	}
	return o
}

// ReseqHoldBucketsMs are the upper bounds, in ms, of the hold-time
// histogram's buckets; the last bucket of ReseqStats.HoldMs counts longer
// holds.
var ReseqHoldBucketsMs = [...]int64{1, 2, 5, 10, 20, 50, 100, 200, 500}

// ReseqStats are a bond's resequencing counters, in packets unless named
// otherwise.
type ReseqStats struct {
	InOrder         uint64  `json:"in_order"`          // tagged packets delivered on arrival, in order
	Held            uint64  `json:"held"`              // packets held behind a gap
	ReleasedInOrder uint64  `json:"released_in_order"` // held packets released when their gap filled
	ReleasedTimeout uint64  `json:"released_timeout"`  // held packets released after giving up a gap (wait bound passed, or no room)
	Skipped         uint64  `json:"skipped"`           // sequence numbers given up on
	Late            uint64  `json:"late"`              // packets arriving after their gap was given up, delivered at once
	Duplicates      uint64  `json:"duplicates"`        // copies of a packet already held, dropped
	Overflow        uint64  `json:"overflow"`          // packets that found no room (flows, packets or bytes) or ran past the window
	Resyncs         uint64  `json:"resyncs"`           // flows restarted by a sequence number far behind
	Dropped         uint64  `json:"dropped"`           // released packets lost because the caller did not pop
	HeldNow         int     `json:"held_now"`          // packets held at the moment
	HeldBytesNow    int     `json:"held_bytes_now"`    // their bytes
	WaitMs          float64 `json:"wait_ms"`           // the adaptive bound before the per-flow cap, ms
	// HoldMs is the distribution of held packets' hold times: HoldMs[i]
	// counts holds ≤ ReseqHoldBucketsMs[i] ms (and above the bucket
	// before), the last entry those above 500 ms.
	HoldMs [len(ReseqHoldBucketsMs) + 1]uint64 `json:"hold_ms"`
}

// reseqVerdict tells the caller of push what to do with the packet.
type reseqVerdict uint8

const (
	// reseqDeliver: write the packet now, then pop what it released.
	reseqDeliver reseqVerdict = iota
	// reseqHeld: the resequencer took a copy (held, or queued behind
	// packets it released); pop what is ready.
	reseqHeld
	// reseqDrop: a duplicate of a held packet; drop it.
	reseqDrop
)

// resequencer is the receive side's per-flow reorder buffer of one bond.
// It is pure: it takes the time as an argument and has no goroutine.
// It is not safe for concurrent use: the bond calls push, pop, flush and
// the TUN writes of what they release under one mutex, so that a flow's
// order survives the hand-over between receive goroutines. Held packets
// are copies in pooled buffers (pools.go) that the resequencer owns until
// pop hands them to the caller, who returns them with putBuf after the TUN
// write. Nothing allocates per packet; the tables are allocated on the
// first push.
type resequencer struct {
	o     ReseqOptions
	epoch time.Time
	set   bool
	wmask uint32

	flows   []rsFlow // by flow id
	rings   []rsRing // reorder windows
	freeRng []int16  // indexes of free rings
	active  int      // rings in use
	pkts    []rsPkt  // held packets
	freePkt []int32  // indexes of free pkts
	heldB   int

	out     []rsPkt // released, awaiting pop: a ring buffer
	outHead int
	outLen  int

	spread  int64 // ns, setSpread
	resend  int64 // ns, setSpread
	peak    int64 // ns, decaying maximum of the reordering delay
	decayAt int64 // ns, when peak last decayed
	samples int   // reordering-delay samples, saturating at reseqWarmup

	st ReseqStats
}

type rsFlow struct {
	skipAt   int64 // ns of the last gap given up on a timeout; 0: none pending
	skipWait int64 // how long that gap had been waited for, ns
	next     uint32
	ring     int16 // index+1 into rings; 0: holds nothing
	seen     bool
	epoch    bool
}

type rsRing struct {
	slot     []int32 // by seq & wmask: index+1 into pkts; 0: empty
	flow     uint16
	count    int
	since    int64 // arrival of the oldest held packet, ns
	deadline int64 // the earliest due of the held packets, ns
}

type rsPkt struct {
	buf          *packetBuf // the packet is buf[Headroom:Headroom+n]
	n            int
	arrived, due int64 // ns
}

func newResequencer(o ReseqOptions) *resequencer {
	o = o.withDefaults()
	return &resequencer{o: o, wmask: uint32(o.Window - 1)}
}

// alloc sizes the tables, once.
func (r *resequencer) alloc() {
	r.flows = make([]rsFlow, MaxFlows)
	r.rings = make([]rsRing, r.o.Flows)
	slots := make([]int32, r.o.Flows*r.o.Window)
	r.freeRng = make([]int16, 0, r.o.Flows)
	for i := range r.rings {
		r.rings[i].slot = slots[i*r.o.Window : (i+1)*r.o.Window : (i+1)*r.o.Window]
		r.freeRng = append(r.freeRng, int16(r.o.Flows-1-i))
	}
	r.pkts = make([]rsPkt, r.o.Packets)
	r.freePkt = make([]int32, 0, r.o.Packets)
	for i := range r.pkts {
		r.freePkt = append(r.freePkt, int32(r.o.Packets-1-i))
	}
	r.out = make([]rsPkt, r.o.Packets+1)
}

// mono converts now to ns since the first call, ≥ 1.
func (r *resequencer) mono(now time.Time) int64 {
	if !r.set {
		r.epoch, r.set = now.Add(-time.Nanosecond), true
	}
	return int64(now.Sub(r.epoch))
}

// push offers the inner packet pkt of a tagged flow, arrived at now. It does
// not retain pkt. After every push, the caller writes pkt if the verdict is
// reseqDeliver, and then pops and writes until pop reports nothing.
func (r *resequencer) push(now time.Time, tag FlowTag, pkt []byte) reseqVerdict {
	if r.flows == nil {
		r.alloc()
	}
	t := r.mono(now)
	f := &r.flows[tag.Flow&(MaxFlows-1)]
	seq := tag.Seq & flowSeqMask
	win := uint32(r.o.Window)
	if !f.seen || tag.Epoch != f.epoch {
		if f.ring != 0 { // what the old epoch left
			r.giveUp(f, t, win)
		}
		// The sender numbers a flow from 0 in each epoch. A flow first
		// seen far from 0 was numbered before this receiver started:
		// its first packet sets the order.
		f.next, f.skipAt = 0, 0
		if !f.seen && seq >= win {
			f.next = seq
		}
		f.seen, f.epoch = true, tag.Epoch
	}
	switch d := (seq - f.next) & flowSeqMask; {
	case d == 0:
		r.st.InOrder++
		f.next = (f.next + 1) & flowSeqMask
		if f.ring != 0 {
			rg := &r.rings[f.ring-1]
			r.sample(t-rg.since, false, t)
			r.releaseRun(f, t, true)
		}
		return reseqDeliver
	case d < win:
		if f.ring != 0 && r.rings[f.ring-1].slot[seq&r.wmask] != 0 {
			r.st.Duplicates++
			return reseqDrop
		}
		if r.hold(f, tag.Flow&(MaxFlows-1), seq, pkt, t, r.wait(tag.WaitMs)) {
			r.st.Held++
			return reseqHeld
		}
		r.st.Overflow++
		return r.forceTo(f, seq, d, pkt, t)
	case d < 1<<(FlowSeqBits-1): // beyond the window
		r.st.Overflow++
		return r.forceTo(f, seq, d, pkt, t)
	case (f.next-seq)&flowSeqMask <= reseqResync: // behind: its gap was given up
		r.st.Late++
		if f.skipAt != 0 {
			r.sample(f.skipWait+t-f.skipAt, true, t)
			f.skipAt = 0
		}
		return reseqDeliver
	default: // far behind: the sender restarted the flow
		r.st.Resyncs++
		if f.ring != 0 {
			r.giveUp(f, t, win)
		}
		f.next = (seq + 1) & flowSeqMask
		return r.deliverAfter(pkt, t)
	}
}

// hold copies pkt into a pooled buffer and keeps it in f's window, or
// reports false when there is no room.
func (r *resequencer) hold(f *rsFlow, flow uint16, seq uint32, pkt []byte, t, wait int64) bool {
	if len(pkt) > bufferSize-Headroom || len(r.freePkt) == 0 || r.heldB+len(pkt) > r.o.Bytes {
		return false
	}
	if f.ring == 0 {
		if len(r.freeRng) == 0 {
			return false
		}
		i := r.freeRng[len(r.freeRng)-1]
		r.freeRng = r.freeRng[:len(r.freeRng)-1]
		rg := &r.rings[i]
		rg.flow, rg.count, rg.since, rg.deadline = flow, 0, t, t+wait
		f.ring = i + 1
		r.active++
	}
	rg := &r.rings[f.ring-1]
	pi := r.freePkt[len(r.freePkt)-1]
	r.freePkt = r.freePkt[:len(r.freePkt)-1]
	buf := getBuf()
	copy(buf[Headroom:], pkt)
	r.pkts[pi] = rsPkt{buf: buf, n: len(pkt), arrived: t, due: t + wait}
	rg.slot[seq&r.wmask] = pi + 1
	rg.count++
	rg.since = min(rg.since, t)
	rg.deadline = min(rg.deadline, t+wait)
	r.heldB += len(pkt)
	return true
}

// forceTo gives up f's gaps before seq, d ahead of f.next: the packets held
// before seq are released in order, then pkt, then those held after it
// that are now in order.
func (r *resequencer) forceTo(f *rsFlow, seq, d uint32, pkt []byte, t int64) reseqVerdict {
	released := r.giveUp(f, t, min(d, uint32(r.o.Window)))
	r.st.Skipped += uint64(d) - uint64(released)
	f.next = (seq + 1) & flowSeqMask
	v := r.deliverAfter(pkt, t)
	if f.ring != 0 {
		r.releaseRun(f, t, false)
	}
	return v
}

// giveUp moves f.next on by n ≤ Window sequence numbers, releasing in
// order what f holds there, and returns how many packets it released.
func (r *resequencer) giveUp(f *rsFlow, t int64, n uint32) (released uint32) {
	if f.ring == 0 {
		f.next = (f.next + n) & flowSeqMask
		return 0
	}
	rg := &r.rings[f.ring-1]
	for i := uint32(0); i < n; i++ {
		if rg.count == 0 {
			f.next = (f.next + n - i) & flowSeqMask
			break
		}
		if s := &rg.slot[f.next&r.wmask]; *s != 0 {
			r.release(rg, s, t, false)
			released++
		}
		f.next = (f.next + 1) & flowSeqMask
	}
	r.settle(f, rg)
	return released
}

// deliverAfter returns reseqDeliver if nothing waits for pop, else queues a
// copy of pkt behind what does.
func (r *resequencer) deliverAfter(pkt []byte, t int64) reseqVerdict {
	if r.outLen == 0 {
		return reseqDeliver
	}
	if len(pkt) > bufferSize-Headroom {
		r.st.Dropped++
		return reseqHeld
	}
	buf := getBuf()
	copy(buf[Headroom:], pkt)
	r.enqueue(rsPkt{buf: buf, n: len(pkt), arrived: t})
	return reseqHeld
}

// releaseRun releases the packets f holds from f.next on that are in
// order, counting them as released in order when their gap was filled.
func (r *resequencer) releaseRun(f *rsFlow, t int64, filled bool) {
	rg := &r.rings[f.ring-1]
	for rg.count > 0 {
		s := &rg.slot[f.next&r.wmask]
		if *s == 0 {
			break
		}
		r.release(rg, s, t, filled)
		f.next = (f.next + 1) & flowSeqMask
	}
	r.settle(f, rg)
}

// release moves the held packet of slot s to the pop queue.
func (r *resequencer) release(rg *rsRing, s *int32, t int64, filled bool) {
	p := r.pkts[*s-1]
	r.freePkt = append(r.freePkt, *s-1)
	r.pkts[*s-1] = rsPkt{}
	*s = 0
	rg.count--
	r.heldB -= p.n
	if filled {
		r.st.ReleasedInOrder++
	} else {
		r.st.ReleasedTimeout++
	}
	r.st.HoldMs[holdBucket(t-p.arrived)]++
	r.enqueue(p)
}

// settle frees f's ring once it is empty, else recomputes its oldest
// arrival and earliest due.
func (r *resequencer) settle(f *rsFlow, rg *rsRing) {
	if rg.count == 0 {
		r.freeRng = append(r.freeRng, f.ring-1)
		f.ring = 0
		r.active--
		return
	}
	rg.since, rg.deadline = 1<<62, 1<<62
	for _, s := range rg.slot {
		if s != 0 {
			p := &r.pkts[s-1]
			rg.since = min(rg.since, p.arrived)
			rg.deadline = min(rg.deadline, p.due)
		}
	}
}

func (r *resequencer) enqueue(p rsPkt) {
	if r.outLen == len(r.out) {
		putBuf(p.buf)
		r.st.Dropped++
		return
	}
	r.out[(r.outHead+r.outLen)%len(r.out)] = p
	r.outLen++
}

// pop returns the next released packet, buf[Headroom:Headroom+n], in the
// order the flows need. The caller owns buf and returns it with putBuf
// after writing the packet.
func (r *resequencer) pop() (buf *packetBuf, n int, ok bool) {
	if r.outLen == 0 {
		return nil, 0, false
	}
	p := &r.out[r.outHead]
	buf, n = p.buf, p.n
	*p = rsPkt{}
	r.outHead = (r.outHead + 1) % len(r.out)
	r.outLen--
	return buf, n, true
}

// flush gives up the gaps whose wait bound has passed at now and releases
// what waited behind them; the caller then pops.
func (r *resequencer) flush(now time.Time) {
	if r.active == 0 {
		return
	}
	t := r.mono(now)
	for i := range r.rings {
		rg := &r.rings[i]
		if rg.count == 0 || rg.deadline > t {
			continue
		}
		f := &r.flows[rg.flow]
		for f.ring != 0 && rg.deadline <= t {
			for rg.slot[f.next&r.wmask] == 0 { // count > 0: a held packet is within the window
				r.st.Skipped++
				f.next = (f.next + 1) & flowSeqMask
			}
			f.skipAt, f.skipWait = t, t-rg.since
			r.releaseRun(f, t, false)
		}
	}
}

// nextDeadline returns when flush next has something to do; ok is false
// while nothing is held.
func (r *resequencer) nextDeadline() (deadline time.Time, ok bool) {
	if r.active == 0 {
		return time.Time{}, false
	}
	d := int64(1 << 62)
	for i := range r.rings {
		if r.rings[i].count > 0 {
			d = min(d, r.rings[i].deadline)
		}
	}
	return r.epoch.Add(time.Duration(d)), true
}

// setSpread sets the hints: spread, the wait the paths' delays call for
// (for example the largest difference of their one-way delays), and
// resend, how late a retransmitted packet comes; ≤ 0 for none. A flow
// whose cap is below resend does not wait for retransmissions (they
// would come too late anyway) and waits the spread alone.
func (r *resequencer) setSpread(spread, resend time.Duration) {
	r.spread, r.resend = max(int64(spread), 0), max(int64(resend), 0)
}

// wait returns the bound for a packet whose tag says waitMs.
func (r *resequencer) wait(waitMs uint16) int64 {
	c := int64(r.o.DefaultWait)
	if waitMs > 0 {
		c = int64(waitMs) * int64(time.Millisecond)
	}
	if r.samples < reseqWarmup && r.spread == 0 && r.resend == 0 {
		return c
	}
	return min(r.estimate(c), c)
}

// estimate is the bound before a flow's cap c, ns.
func (r *resequencer) estimate(c int64) int64 {
	e := r.spread
	if r.resend <= c {
		e = max(e, r.resend)
	}
	if r.samples >= reseqWarmup {
		e = max(e, r.peak+r.peak/4)
	}
	return e + int64(r.o.MinWait)
}

// reseqDecayEvery is how often, at most, the decaying maximum of the
// reordering delay moves 1/256 of the way towards a smaller sample: its
// memory lasts about 256 such steps, 4 s, whatever the packet rate. A
// decay per sample would forget a path's delay spread within a fraction
// of a second at a few thousand packets per second, and then give up
// gaps that the slower path was about to fill (measured: a TCP bulk flow
// over 15- and 45-ms paths lost a third of its rate that way).
const reseqDecayEvery = 16 * time.Millisecond

// sample feeds the decaying maximum one reordering delay s, ns, at t; late
// marks a packet that came after its gap was given up, which ends the
// warm-up at once (the cap, or the hint, was too short).
func (r *resequencer) sample(s int64, late bool, t int64) {
	s = max(s, 0)
	if s >= r.peak {
		r.peak = s
	} else if t-r.decayAt >= int64(reseqDecayEvery) {
		r.peak -= (r.peak - s) >> 8
		r.decayAt = t
	}
	if late {
		r.samples = reseqWarmup
	} else if r.samples < reseqWarmup {
		r.samples++
	}
}

func holdBucket(ns int64) int {
	for i, b := range ReseqHoldBucketsMs {
		if ns <= b*int64(time.Millisecond) {
			return i
		}
	}
	return len(ReseqHoldBucketsMs)
}

// stats returns the counters; call it under the same lock as push.
func (r *resequencer) stats() ReseqStats {
	s := r.st
	s.HeldNow = r.o.Packets - len(r.freePkt)
	if r.flows == nil {
		s.HeldNow = 0
	}
	s.HeldBytesNow = r.heldB
	if r.samples >= reseqWarmup || r.spread > 0 || r.resend > 0 {
		s.WaitMs = float64(r.estimate(int64(r.o.DefaultWait))) / float64(time.Millisecond)
	}
	return s
}

// close returns every buffer the resequencer holds to the pool.
func (r *resequencer) close() {
	for i := range r.pkts {
		if r.pkts[i].buf != nil {
			putBuf(r.pkts[i].buf)
		}
	}
	for {
		buf, _, ok := r.pop()
		if !ok {
			break
		}
		putBuf(buf)
	}
	*r = *newResequencer(r.o)
}
