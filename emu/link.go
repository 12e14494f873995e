package emu

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of [LinkConfig].
const (
	// DefaultQueueBytes is the drop-tail queue limit of a bottleneck when
	// neither QueueBytes nor QueueDelay is set: 100 packets of 1500 bytes,
	// the common mm-link "droptail packets=100" setting (mm-link itself
	// defaults to an unbounded queue, which a relay cannot afford).
	DefaultQueueBytes = 100 * 1500
	// DefaultDelaySampleInterval is how long one draw from
	// LinkConfig.DelaySamples holds when DelaySampleInterval is zero.
	DefaultDelaySampleInterval = time.Second
)

// LinkConfig describes one direction of an emulated link. The zero value is
// a perfect link: no delay, no loss, unlimited rate. Models compose; a
// packet arriving at model time t goes through these stages in order:
//
//  1. Outages: inside an outage window the packet is dropped (DropOutage).
//  2. Loss: Loss (Bernoulli), GilbertElliott and Series.Loss each decide
//     independently, from their own random stream; any loss drops the
//     packet (DropLoss).
//  3. Bottleneck: at most one of Rate, Mahimahi and Series.Rate sets the
//     capacity. The packet waits in a FIFO drop-tail queue and leaves when
//     its last byte has been served; if the queue limit would be exceeded it
//     is dropped (DropQueue). Without a capacity source it leaves at once.
//  4. Delay: release = departure + Delay + Series.OWD + a DelaySamples draw
//     + jitter, then (unless Reorder) at least the previous release.
//
// Sizes are IP packet sizes in bytes; the [Relay] adds the IP and UDP
// header bytes to the datagram payload.
type LinkConfig struct {
	// Delay is the constant one-way delay added to every delivered packet.
	// Zero: none.
	Delay time.Duration
	// Jitter, when positive, adds to each packet's delay a value drawn
	// uniformly from [-Jitter, +Jitter] (netem's default jitter shape); the
	// total delay never goes below zero.
	Jitter time.Duration
	// Reorder allows jitter and delay changes to reorder packets. When false
	// (the default) no packet is released before the packet ahead of it:
	// release = max(own release, previous release).
	Reorder bool

	// DelaySamples, when not empty, is an empirical distribution of extra
	// one-way delay (for example half of measured RTTs). For every
	// DelaySampleInterval of model time one value is picked uniformly from
	// the list (the pick depends only on the seed and the interval number)
	// and added to the delay of the packets that leave the bottleneck in
	// that interval. Each value must be ≥ 0.
	DelaySamples []time.Duration
	// DelaySampleInterval is how long one DelaySamples draw holds. Default
	// 1 s.
	DelaySampleInterval time.Duration

	// Loss is the Bernoulli loss probability of each packet, in [0, 1].
	Loss float64
	// GilbertElliott, when set, adds two-state burst loss.
	GilbertElliott *GilbertElliott

	// Rate, when positive, is a constant bottleneck capacity (bits/s).
	Rate BitRate
	// Mahimahi, when set, makes a Mahimahi packet-delivery trace the
	// bottleneck, with mm-link's semantics (see [MahimahiTrace]).
	Mahimahi *MahimahiTrace
	// Series, when set, supplies per-interval capacity (if Series.Rate is
	// set), one-way delay and loss.
	Series *Series
	// TraceOffset is the position in the Mahimahi or Series trace at model
	// time 0, ≥ 0; it may exceed the trace period (traces loop).
	TraceOffset time.Duration

	// QueueBytes limits the bottleneck queue: a packet is dropped when the
	// bytes of the packets not yet fully served plus its own would exceed
	// it. Zero: no byte limit, unless QueueDelay is zero as well, in which
	// case DefaultQueueBytes applies.
	QueueBytes int
	// QueueDelay limits the bottleneck queue in time: a packet is dropped
	// when it would wait longer than QueueDelay from arrival until its last
	// byte is served. For a constant Rate this is a byte limit of
	// Rate·QueueDelay; for traces it follows the trace's capacity. Zero: no
	// time limit.
	QueueDelay time.Duration

	// Outages, when set, schedules periodic outages.
	Outages *Outages
	// WallClock, for a Link started by a [Relay], aligns Outages and the
	// traces to the UTC clock: when the link starts, the relay adds
	// (now mod the outage period, 60 s by default) to Outages.Phase and to
	// TraceOffset, so that outages at At = 12 s happen at second 12 of a
	// UTC minute and a trace whose time 0 is second :00 of a minute (like
	// the Starlink trace) stays in step. Pure models ignore it.
	WallClock bool
}

// Drop is the fate of a packet in a [Link].
type Drop uint8

const (
	Delivered  Drop = iota // not dropped: released at the returned time
	DropLoss               // random loss: Loss, GilbertElliott or Series.Loss
	DropQueue              // drop-tail queue full (QueueBytes or QueueDelay)
	DropOutage             // inside an outage window, or the relay's link is down
)

// String names the drop reason: "delivered", "loss", "queue", "outage".
func (d Drop) String() string {
	switch d {
	case Delivered:
		return "delivered"
	case DropLoss:
		return "loss"
	case DropQueue:
		return "queue"
	case DropOutage:
		return "outage"
	}
	return "unknown"
}

type bottleneckKind uint8

const (
	bnNone bottleneckKind = iota
	bnRate
	bnMahimahi
	bnSeries
)

// Validate reports whether c is usable, with an error wrapping
// [ErrInvalidConfig] that names the first problem.
func (c *LinkConfig) Validate() error {
	_, err := c.bottleneck()
	if err != nil {
		return err
	}
	switch {
	case c.Delay < 0:
		return invalidf("delay %v < 0", c.Delay)
	case c.Jitter < 0:
		return invalidf("jitter %v < 0", c.Jitter)
	case c.DelaySampleInterval < 0:
		return invalidf("delay sample interval %v < 0", c.DelaySampleInterval)
	case !isProb(c.Loss):
		return invalidf("loss %v outside [0, 1]", c.Loss)
	case c.Rate < 0:
		return invalidf("rate %d bit/s < 0", int64(c.Rate))
	case c.TraceOffset < 0:
		return invalidf("trace offset %v < 0", c.TraceOffset)
	case c.QueueBytes < 0:
		return invalidf("queue %d bytes < 0", c.QueueBytes)
	case c.QueueDelay < 0:
		return invalidf("queue delay %v < 0", c.QueueDelay)
	}
	for _, d := range c.DelaySamples {
		if d < 0 {
			return invalidf("delay sample %v < 0", d)
		}
	}
	if c.GilbertElliott != nil {
		if err := c.GilbertElliott.validate(); err != nil {
			return err
		}
	}
	if c.Mahimahi != nil {
		if err := c.Mahimahi.validate(); err != nil {
			return err
		}
	}
	if c.Series != nil {
		if err := c.Series.validate(); err != nil {
			return err
		}
	}
	if c.Outages != nil {
		o := c.Outages.withDefaults()
		if err := o.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (c *LinkConfig) bottleneck() (bottleneckKind, error) {
	k, n := bnNone, 0
	if c.Rate > 0 {
		k, n = bnRate, n+1
	}
	if c.Mahimahi != nil {
		k, n = bnMahimahi, n+1
	}
	if c.Series != nil && c.Series.Rate != nil {
		k, n = bnSeries, n+1
	}
	if n > 1 {
		return 0, invalidf("more than one capacity source (rate, mahimahi trace, series rate)")
	}
	return k, nil
}

// shifted returns c with Outages.Phase and TraceOffset advanced by d (for
// wall-clock alignment). Outages is copied, not modified.
func (c LinkConfig) shifted(d time.Duration) LinkConfig {
	c.TraceOffset += d
	if c.Outages != nil {
		o := c.Outages.withDefaults()
		o.Phase = (o.Phase + d) % o.Period
		c.Outages = &o
	}
	return c
}

// wallPeriod is the period the relay aligns a WallClock link to.
func (c *LinkConfig) wallPeriod() time.Duration {
	if c.Outages != nil && c.Outages.Period > 0 {
		return c.Outages.Period
	}
	return DefaultOutagePeriod
}

// Link is the deterministic model of one direction of a link. For a given
// config, seed and sequence of Send calls it always returns the same
// results: it is a pure function of (config, seed, arrivals), driven by
// virtual time, so tests need no clock.
//
// A Link is not safe for concurrent use. Send costs O(log n) in the trace
// length and does not allocate once its queue bookkeeping has grown to the
// queue's size.
type Link struct {
	cfg     LinkConfig
	seed    uint64
	kind    bottleneckKind
	outages Outages // with defaults; valid if cfg.Outages != nil

	last        time.Duration // latest arrival seen
	lastRelease time.Duration // latest release handed out

	lossRNG, seriesLossRNG, jitterRNG rand.PCG
	ge                                geState

	// bottleneck state
	busy   time.Duration // rate/series: model time the last admitted packet finishes
	mmHave bool          // mahimahi: a packet has been served
	mmOpp  int64         // mahimahi: global index of the opportunity the last packet finished in
	mmUsed int           // mahimahi: bytes of that opportunity already used

	queueLimit int  // bytes; 0: none
	fifo       fifo // admitted packets not yet fully served (for queueLimit)
	delaySeed  uint64
}

// NewLink returns the model of one link direction with configuration cfg;
// seed selects the random streams. It returns an error wrapping
// [ErrInvalidConfig] if cfg is invalid. The traces in cfg are shared, not
// copied, and must not be modified afterwards.
func NewLink(cfg LinkConfig, seed uint64) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kind, _ := cfg.bottleneck()
	l := &Link{
		cfg:           cfg,
		seed:          seed,
		kind:          kind,
		lossRNG:       newPCG(seed, streamLoss),
		seriesLossRNG: newPCG(seed, streamSeriesLoss),
		jitterRNG:     newPCG(seed, streamJitter),
		ge:            geState{rng: newPCG(seed, streamGE)},
		delaySeed:     splitmix64(seed ^ streamDelaySamples),
	}
	if cfg.Outages != nil {
		l.outages = cfg.Outages.withDefaults()
	}
	if kind != bnNone {
		l.queueLimit = cfg.QueueBytes
		if cfg.QueueBytes == 0 && cfg.QueueDelay == 0 {
			l.queueLimit = DefaultQueueBytes
		}
	}
	if l.cfg.DelaySampleInterval == 0 {
		l.cfg.DelaySampleInterval = DefaultDelaySampleInterval
	}
	return l, nil
}

// Config returns the configuration the link was built with (with
// DelaySampleInterval defaulted).
func (l *Link) Config() LinkConfig { return l.cfg }

// Send models one packet of sizeBytes arriving at model time at and
// returns its fate: Delivered with the model time at which it leaves the
// link (≥ at), or the drop reason (release is then 0). Arrival times must
// not decrease; an earlier time is treated as the latest one seen.
func (l *Link) Send(at time.Duration, sizeBytes int) (release time.Duration, drop Drop) {
	if at < l.last {
		at = l.last
	}
	l.last = at
	if sizeBytes < 0 {
		sizeBytes = 0
	}

	// 1. Outages.
	if l.cfg.Outages != nil && l.outages.in(l.seed, at) {
		return 0, DropOutage
	}

	// 2. Loss. Every configured process draws for every packet, so each
	// keeps its own pattern whatever the others decide.
	lost := false
	if l.cfg.Loss > 0 {
		lost = unitFloat(l.lossRNG.Uint64()) < l.cfg.Loss
	}
	if l.cfg.GilbertElliott != nil {
		lost = l.ge.step(l.cfg.GilbertElliott) || lost
	}
	if s := l.cfg.Series; s != nil && s.Loss != nil {
		p := s.Loss[s.index(at+l.cfg.TraceOffset)]
		lost = unitFloat(l.seriesLossRNG.Uint64()) < p || lost
	}
	if lost {
		return 0, DropLoss
	}

	// 3. Bottleneck.
	dep, ok := l.serve(at, sizeBytes)
	if !ok {
		return 0, DropQueue
	}

	// 4. Delay.
	rel := dep + l.cfg.Delay
	if s := l.cfg.Series; s != nil && s.OWD != nil {
		rel += s.OWD[s.index(dep+l.cfg.TraceOffset)]
	}
	if n := len(l.cfg.DelaySamples); n > 0 {
		k := int64(dep / l.cfg.DelaySampleInterval)
		i := int(hashUnit(l.delaySeed, streamDelaySamples, k) * float64(n))
		rel += l.cfg.DelaySamples[min(i, n-1)]
	}
	if j := l.cfg.Jitter; j > 0 {
		u := unitFloat(l.jitterRNG.Uint64())
		rel += time.Duration((2*u - 1) * float64(j))
		rel = max(rel, dep)
	}
	if !l.cfg.Reorder {
		rel = max(rel, l.lastRelease)
	}
	l.lastRelease = max(l.lastRelease, rel)
	return rel, Delivered
}

// Outage reports whether model time t falls inside a scheduled outage.
func (l *Link) Outage(t time.Duration) bool {
	return l.cfg.Outages != nil && l.outages.in(l.seed, t)
}

// OutageWindows lists the scheduled outage windows that start in model
// time [from, to), in order (nil without Outages).
func (l *Link) OutageWindows(from, to time.Duration) []Window {
	if l.cfg.Outages == nil {
		return nil
	}
	return l.outages.windows(l.seed, from, to)
}

// serve runs the packet through the bottleneck and returns the model time
// its last byte is served, or ok = false if the drop-tail queue is full.
func (l *Link) serve(at time.Duration, size int) (dep time.Duration, ok bool) {
	switch l.kind {
	case bnNone:
		return at, true
	case bnRate:
		dep = max(at, l.busy) + l.cfg.Rate.txTime(size)
		if !l.admit(at, dep, size) {
			return 0, false
		}
		l.busy = dep
		return dep, true
	case bnSeries:
		dep, ok = l.serveSeries(max(at, l.busy), size)
		if !ok || !l.admit(at, dep, size) {
			return 0, false
		}
		l.busy = dep
		return dep, true
	case bnMahimahi:
		opp, used := l.serveMahimahi(at, size)
		off := l.cfg.TraceOffset
		dep = l.cfg.Mahimahi.opTime(opp) - off
		if !l.admit(at, dep, size) {
			return 0, false
		}
		l.mmHave, l.mmOpp, l.mmUsed = true, opp, used
		return dep, true
	}
	return at, true
}

// admit applies the drop-tail limits to a packet arriving at `at` that
// would be fully served at dep, and records it if admitted.
func (l *Link) admit(at, dep time.Duration, size int) bool {
	if l.cfg.QueueDelay > 0 && dep-at > l.cfg.QueueDelay {
		return false
	}
	if l.queueLimit > 0 {
		l.fifo.expire(at)
		if l.fifo.bytes+size > l.queueLimit {
			return false
		}
		l.fifo.push(dep, size)
	}
	return true
}

// serveSeries serves size bytes starting at model time start on the
// time-varying capacity of the series (a fluid rate server: the rate of
// interval i applies to the part of the packet served within it).
func (l *Link) serveSeries(start time.Duration, size int) (time.Duration, bool) {
	s := l.cfg.Series
	off := l.cfg.TraceOffset
	t := start + off
	remaining := float64(size) * 8
	if remaining == 0 {
		return start, true
	}
	// Bound the walk: beyond a few loops of the trace the packet would wait
	// for ever in any sane queue; treat it as a queue drop.
	maxSteps := 4*s.Len() + 16
	for step := 0; step < maxSteps; step++ {
		k := int64(t / s.Interval)
		end := time.Duration(k+1) * s.Interval
		r := float64(s.Rate[int(k%int64(s.Len()))])
		if r > 0 {
			capBits := r * float64(end-t) / float64(time.Second)
			if capBits >= remaining {
				d := time.Duration(math.Ceil(remaining * float64(time.Second) / r))
				return min(t+d, end) - off, true
			}
			remaining -= capBits
		}
		t = end
	}
	return 0, false
}

// serveMahimahi returns the global opportunity in which the last byte of
// the packet is delivered and the bytes of that opportunity used after it,
// following mm-link's LinkQueue::rationalize: an opportunity delivers up to
// 1500 bytes of the queue's head, possibly finishing one packet and
// starting the next; bytes unused because the queue is empty are lost; a
// packet arriving at t uses only opportunities after t.
func (l *Link) serveMahimahi(at time.Duration, size int) (opp int64, used int) {
	m := l.cfg.Mahimahi
	t := at + l.cfg.TraceOffset
	const full = MahimahiOpportunityBytes
	var avail int
	if l.mmHave && l.mmUsed < full && m.opTime(l.mmOpp) > t {
		// The packet ahead finished inside an opportunity that comes after
		// our arrival: we are queued by then and use its leftover bytes.
		opp, avail = l.mmOpp, full-l.mmUsed
	} else {
		opp = m.firstAfter(t)
		if l.mmHave && opp <= l.mmOpp {
			opp = l.mmOpp + 1
		}
		avail = full
	}
	need := max(size, 1)
	if need <= avail {
		return opp, full - avail + need
	}
	need -= avail
	opp++
	for need > full {
		need -= full
		opp++
	}
	return opp, need
}

// fifo records (departure, size) of admitted packets until they depart, to
// know the queue's byte backlog. It is a ring buffer that grows as needed.
type fifo struct {
	dep   []time.Duration
	size  []int
	head  int
	n     int
	bytes int
}

func (f *fifo) expire(now time.Duration) {
	for f.n > 0 && f.dep[f.head] <= now {
		f.bytes -= f.size[f.head]
		f.head = (f.head + 1) % len(f.dep)
		f.n--
	}
}

func (f *fifo) push(dep time.Duration, size int) {
	if f.n == len(f.dep) {
		c := max(64, 2*len(f.dep))
		nd, ns := make([]time.Duration, c), make([]int, c)
		for i := 0; i < f.n; i++ {
			nd[i] = f.dep[(f.head+i)%len(f.dep)]
			ns[i] = f.size[(f.head+i)%len(f.dep)]
		}
		f.dep, f.size, f.head = nd, ns, 0
	}
	i := (f.head + f.n) % len(f.dep)
	f.dep[i], f.size[i] = dep, size
	f.n++
	f.bytes += size
}
