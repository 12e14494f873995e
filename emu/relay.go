package emu

// The relay, top to bottom:
//
//   routineReadClients (1)   Listen → session lookup/creation → up model → up schedule
//   routineReadUpstream (1 per client session)
//                            session socket → down model → down schedule
//   routineRelease (2: up, down)
//                            schedule → wait for the release time → write
//                            (up: through the client's session socket to
//                            Upstream; down: through Listen to the client)
//   routineExpire (1)        closes sessions idle for IdleTimeout
//
// Close closes Listen, every session socket and the done channel, then
// waits for all of them (wg).

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [Options].
const (
	DefaultMaxClients   = 64
	DefaultIdleTimeout  = 2 * time.Minute
	DefaultMaxScheduled = 16384
	// DefaultSpinWindow is how long before a release time the release
	// routine stops sleeping and spins on the clock. Linux nanosleep with a
	// 1-ns timer slack wakes about 50–70 µs late at the median and 100 µs
	// or more at p99 (measured on the 2-core development VM); Go timers
	// wake about 1 ms late.
	DefaultSpinWindow = 100 * time.Microsecond
)

const (
	// timerMargin: waits longer than this use a Go timer (wakeable, ~1 ms
	// late) up to this much before the release time, then precise sleeps.
	timerMargin = 3 * time.Millisecond
	// sleepChunk bounds one precise sleep, so a new earlier packet
	// (Reorder) or Close is noticed within it.
	sleepChunk = 500 * time.Microsecond
	// releaseBatch bounds the packets taken from the schedule at once.
	releaseBatch = 64
	// maxDatagram is the largest UDP payload read.
	maxDatagram = 65535
	// smallPacket is the buffer size of the common packet pool.
	smallPacket = 2048
)

// Options configures a [Relay]. Fields are optional unless marked required.
type Options struct {
	// Listen is the socket clients send to (required). The relay owns it
	// and closes it on Close. A *net.UDPConn avoids per-packet allocations.
	Listen net.PacketConn
	// Upstream is the address every client's datagrams are relayed to
	// (required), e.g. the concentrator.
	Upstream netip.AddrPort
	// DialUpstream opens the upstream-facing socket of a new client. Default:
	// net.ListenUDP("udp", nil). Callers in network namespaces pass their
	// own. The relay owns and closes the sockets it returns.
	DialUpstream func() (net.PacketConn, error)
	// Up models client→upstream, Down upstream→client. Zero: perfect links.
	Up, Down LinkConfig
	// Seed seeds both models (each direction derives its own streams).
	Seed uint64
	// Logger receives lifecycle events at info and debug level. Nil
	// discards them. Nothing is logged per packet.
	Logger *slog.Logger

	// MaxClients bounds the number of client sessions (each one socket and
	// one goroutine). Datagrams from further clients are dropped
	// (DropOther). Default 64.
	MaxClients int
	// IdleTimeout closes a client session after this long without a
	// datagram in either direction. Default 2 min.
	IdleTimeout time.Duration
	// MaxScheduled bounds the packets waiting for release per direction
	// (a memory guard beyond the model's own queue); further packets are
	// dropped (DropOther). Default 16384.
	MaxScheduled int
	// SpinWindow is how long before a release time the release routine
	// busy-waits instead of sleeping. Default 100 µs; negative: never spin
	// (lower CPU use, later releases).
	SpinWindow time.Duration
	// CoarseTimers makes the release routines wait with Go timers only:
	// ~1 ms late on Linux, no dedicated OS threads, no spinning. Required
	// under testing/synctest, whose fake clock the precise sleeps do not
	// see.
	CoarseTimers bool
}

// DirStats are the counters of one relay direction. Packets counts every
// datagram read for the direction; each ends up in exactly one of
// Delivered, the Drop counters, or Scheduled (still waiting).
type DirStats struct {
	Packets, Bytes            uint64 // datagrams and payload bytes read
	Delivered, DeliveredBytes uint64 // datagrams and payload bytes written on
	DropLoss                  uint64 // random loss (model)
	DropQueue                 uint64 // drop-tail queue full (model)
	DropOutage                uint64 // scheduled outage (model) or SetDown
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

// Relay relays UDP datagrams between clients and one upstream address
// through an emulated link per direction, like quic-go's quicproxy: each
// distinct client source address gets its own upstream-facing socket, so
// upstream sees one source address per client and answers reach the right
// client. Datagrams from other sources than Upstream on those sockets are
// dropped.
//
// The models see IP packet sizes: payload + 28 bytes over IPv4, + 48 over
// IPv6. All methods are safe for concurrent use.
type Relay struct {
	opts         Options
	log          *slog.Logger
	start        time.Time // relay time 0 (monotonic)
	listen       net.PacketConn
	listenUDP    *net.UDPConn // nil if Listen is not a *net.UDPConn
	upstream     netip.AddrPort
	upstreamAddr *net.UDPAddr
	down         atomic.Bool
	dirs         [2]direction
	done         chan struct{}
	wg           sync.WaitGroup
	closeOnce    sync.Once

	// mu guards the following.
	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	closed   bool
	gen      [2]int // SetConfig generation per direction (seed derivation)
}

// direction is one direction's model and release schedule.
type direction struct {
	dir   Direction
	bell  chan struct{} // capacity 1: a new head was scheduled
	stats dirCounters

	// mu guards the following.
	mu      sync.Mutex
	link    *Link
	epoch   time.Duration // relay time of the link's model time 0
	reorder bool
	floor   time.Duration // latest release handed out (relay time)
	seq     uint64
	sched   pktHeap
}

// session is one client: its address and its upstream-facing socket.
type session struct {
	client     netip.AddrPort
	clientAddr net.Addr // for a Listen that is not a *net.UDPConn
	conn       net.PacketConn
	udp        *net.UDPConn // conn, if it is one
	overhead   [2]int       // IP+UDP header bytes per direction
	lastSeen   atomic.Int64 // relay time (ns) of the last datagram
	closed     atomic.Bool
}

func (s *session) close() {
	if s.closed.CompareAndSwap(false, true) {
		s.conn.Close()
	}
}

// packet is a datagram waiting for its release time.
type packet struct {
	buf     []byte
	n       int
	release time.Duration // relay time
	seq     uint64        // tie-break: FIFO among equal release times
	sess    *session
}

var smallPool = sync.Pool{New: func() any { return &packet{buf: make([]byte, smallPacket)} }}
var largePool = sync.Pool{New: func() any { return &packet{buf: make([]byte, maxDatagram)} }}

func getPacket(n int) *packet {
	if n <= smallPacket {
		return smallPool.Get().(*packet)
	}
	return largePool.Get().(*packet)
}

func putPacket(p *packet) {
	p.sess = nil
	if len(p.buf) == smallPacket {
		smallPool.Put(p)
	} else {
		largePool.Put(p)
	}
}

// NewRelay starts a relay. It returns an error wrapping [ErrInvalidConfig]
// if opts lacks Listen or Upstream or has an invalid link config; on error
// nothing is started and Listen is left open.
func NewRelay(opts Options) (*Relay, error) {
	if opts.Listen == nil {
		return nil, invalidf("relay: Listen is required")
	}
	if !opts.Upstream.IsValid() || opts.Upstream.Port() == 0 {
		return nil, invalidf("relay: Upstream %v is not an address with a port", opts.Upstream)
	}
	if opts.DialUpstream == nil {
		opts.DialUpstream = func() (net.PacketConn, error) { return net.ListenUDP("udp", nil) }
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxScheduled <= 0 {
		opts.MaxScheduled = DefaultMaxScheduled
	}
	if opts.SpinWindow == 0 {
		opts.SpinWindow = DefaultSpinWindow
	}
	if opts.SpinWindow < 0 {
		opts.SpinWindow = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	up := netip.AddrPortFrom(opts.Upstream.Addr().Unmap(), opts.Upstream.Port())
	r := &Relay{
		opts:         opts,
		log:          log,
		start:        time.Now(),
		listen:       opts.Listen,
		upstream:     up,
		upstreamAddr: net.UDPAddrFromAddrPort(up),
		done:         make(chan struct{}),
		sessions:     make(map[netip.AddrPort]*session),
	}
	r.listenUDP, _ = opts.Listen.(*net.UDPConn)
	for i, cfg := range []LinkConfig{opts.Up, opts.Down} {
		d := &r.dirs[i]
		d.dir = Direction(i)
		d.bell = make(chan struct{}, 1)
		l, err := r.newLink(d.dir, cfg, 0)
		if err != nil {
			return nil, fmt.Errorf("relay %s link: %w", d.dir, err)
		}
		d.link, d.reorder = l, cfg.Reorder
	}
	r.wg.Add(4)
	go r.routineReadClients()
	go r.routineRelease(&r.dirs[Up])
	go r.routineRelease(&r.dirs[Down])
	go r.routineExpire()
	r.log.Info("emu relay started", "listen", opts.Listen.LocalAddr().String(), "upstream", up.String())
	return r, nil
}

// newLink builds the model of direction dir for generation gen,
// aligning it to the UTC clock if cfg.WallClock.
func (r *Relay) newLink(dir Direction, cfg LinkConfig, gen int) (*Link, error) {
	if cfg.WallClock {
		p := cfg.wallPeriod()
		cfg = cfg.shifted(time.Duration(time.Now().UnixNano() % int64(p)))
	}
	return NewLink(cfg, seedFor(r.opts.Seed, fmt.Sprintf("%s#%d", dir, gen)))
}

// Addr returns the address clients send to (Listen's local address).
func (r *Relay) Addr() net.Addr { return r.listen.LocalAddr() }

// SetConfig replaces the model of direction dir. The new model starts now,
// at the start of its traces (plus TraceOffset), with an empty queue;
// packets already scheduled keep their release times, and unless
// cfg.Reorder no later packet is released before them. It returns an
// error wrapping [ErrInvalidConfig] for a bad cfg (the old model stays),
// or net.ErrClosed after Close.
func (r *Relay) SetConfig(dir Direction, cfg LinkConfig) error {
	if dir > Down {
		return invalidf("relay: direction %d", dir)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return net.ErrClosed
	}
	r.gen[dir]++
	gen := r.gen[dir]
	r.mu.Unlock()
	l, err := r.newLink(dir, cfg, gen)
	if err != nil {
		return err
	}
	d := &r.dirs[dir]
	d.mu.Lock()
	d.link, d.epoch, d.reorder = l, r.now(), cfg.Reorder
	d.mu.Unlock()
	r.log.Info("emu relay link changed", "dir", dir.String())
	return nil
}

// SetDown takes the link down (true) or up again (false), in both
// directions. While down, every datagram read and every scheduled datagram
// reaching its release time is dropped (counted as DropOutage), as when a
// path dies.
func (r *Relay) SetDown(down bool) {
	if r.down.Swap(down) != down {
		r.log.Info("emu relay link state", "down", down)
	}
}

// IsDown reports whether SetDown(true) is in force.
func (r *Relay) IsDown() bool { return r.down.Load() }

// Stats returns a snapshot of the counters.
func (r *Relay) Stats() Stats {
	var s Stats
	for i := range r.dirs {
		d := &r.dirs[i]
		ds := d.stats.snapshot()
		d.mu.Lock()
		ds.Scheduled = len(d.sched)
		d.mu.Unlock()
		if i == int(Up) {
			s.Up = ds
		} else {
			s.Down = ds
		}
	}
	r.mu.Lock()
	s.Clients = len(r.sessions)
	r.mu.Unlock()
	return s
}

// Close stops the relay: it closes Listen and every session socket, drops
// the scheduled datagrams and waits for its goroutines to end. It returns
// the error of closing Listen; later calls return nil.
func (r *Relay) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		sessions := r.sessions
		r.sessions = nil
		r.mu.Unlock()
		close(r.done)
		err = r.listen.Close()
		for _, s := range sessions {
			s.close()
		}
		r.wg.Wait()
		for i := range r.dirs {
			d := &r.dirs[i]
			d.mu.Lock()
			for _, p := range d.sched {
				putPacket(p)
			}
			d.sched = nil
			d.mu.Unlock()
		}
		r.log.Info("emu relay stopped")
	})
	return err
}

// now returns the relay time: monotonic time since NewRelay.
func (r *Relay) now() time.Duration { return time.Since(r.start) }

func (r *Relay) isClosed() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// routineReadClients reads datagrams from Listen and schedules them on the
// up direction.
func (r *Relay) routineReadClients() {
	defer r.wg.Done()
	r.log.Debug("routineReadClients started")
	defer r.log.Debug("routineReadClients stopped")
	buf := make([]byte, maxDatagram)
	var cur *session // last session seen, to skip the map lookup
	for {
		var (
			n    int
			from netip.AddrPort
			addr net.Addr
			err  error
		)
		if r.listenUDP != nil {
			n, from, err = r.listenUDP.ReadFromUDPAddrPort(buf)
		} else {
			n, addr, err = r.listen.ReadFrom(buf)
			if ua, ok := addr.(*net.UDPAddr); ok && err == nil {
				from = ua.AddrPort()
			}
		}
		if err != nil {
			if r.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			readErrorPause()
			continue
		}
		now := r.now()
		if !from.IsValid() {
			r.dirs[Up].stats.foreign(n)
			continue
		}
		if cur == nil || cur.client != from || cur.closed.Load() {
			cur = r.session(from, addr)
			if cur == nil {
				r.dirs[Up].stats.foreign(n)
				continue
			}
		}
		cur.lastSeen.Store(int64(now))
		r.schedule(&r.dirs[Up], cur, buf[:n], now)
	}
}

// session returns the session of client from, creating it (and its
// upstream socket and reader) if needed; nil if the relay is closed, full,
// or the socket cannot be opened.
func (r *Relay) session(from netip.AddrPort, addr net.Addr) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if s := r.sessions[from]; s != nil {
		return s
	}
	if len(r.sessions) >= r.opts.MaxClients {
		return nil
	}
	conn, err := r.opts.DialUpstream()
	if err != nil {
		r.log.Warn("emu relay: cannot open upstream socket", "client", from.String(), "err", err)
		return nil
	}
	s := &session{client: from, clientAddr: addr, conn: conn}
	s.udp, _ = conn.(*net.UDPConn)
	if s.clientAddr == nil {
		s.clientAddr = net.UDPAddrFromAddrPort(from)
	}
	s.overhead[Up] = ipUDPOverhead(r.upstream.Addr())
	s.overhead[Down] = ipUDPOverhead(from.Addr())
	s.lastSeen.Store(int64(r.now()))
	r.sessions[from] = s
	r.wg.Add(1)
	go r.routineReadUpstream(s)
	r.log.Info("emu relay: new client", "client", from.String(), "via", conn.LocalAddr().String())
	return s
}

// ipUDPOverhead returns the IP+UDP header bytes for address a.
func ipUDPOverhead(a netip.Addr) int {
	if a.Unmap().Is4() {
		return 20 + 8
	}
	return 40 + 8
}

// routineReadUpstream reads one session's socket and schedules datagrams
// from Upstream on the down direction.
func (r *Relay) routineReadUpstream(s *session) {
	defer r.wg.Done()
	r.log.Debug("routineReadUpstream started", "client", s.client.String())
	defer r.log.Debug("routineReadUpstream stopped", "client", s.client.String())
	buf := make([]byte, maxDatagram)
	for {
		var (
			n    int
			from netip.AddrPort
			err  error
		)
		if s.udp != nil {
			n, from, err = s.udp.ReadFromUDPAddrPort(buf)
		} else {
			var addr net.Addr
			n, addr, err = s.conn.ReadFrom(buf)
			if ua, ok := addr.(*net.UDPAddr); ok && err == nil {
				from = ua.AddrPort()
			}
		}
		if err != nil {
			if s.closed.Load() || r.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			readErrorPause()
			continue
		}
		now := r.now()
		if from.Port() != r.upstream.Port() || from.Addr().Unmap() != r.upstream.Addr() {
			r.dirs[Down].stats.foreign(n)
			continue
		}
		s.lastSeen.Store(int64(now))
		r.schedule(&r.dirs[Down], s, buf[:n], now)
	}
}

// schedule runs one datagram through direction d's model and, unless it
// is dropped, queues a copy for release.
func (r *Relay) schedule(d *direction, s *session, data []byte, now time.Duration) {
	st := &d.stats
	st.packets.Add(1)
	st.bytes.Add(uint64(len(data)))
	if r.down.Load() {
		st.outage.Add(1)
		return
	}
	p := getPacket(len(data))
	p.n = copy(p.buf, data)
	p.sess = s

	d.mu.Lock()
	if len(d.sched) >= r.opts.MaxScheduled {
		d.mu.Unlock()
		putPacket(p)
		st.other.Add(1)
		return
	}
	rel, drop := d.link.Send(now-d.epoch, len(data)+s.overhead[d.dir])
	if drop != Delivered {
		d.mu.Unlock()
		putPacket(p)
		st.drop(drop)
		return
	}
	rel += d.epoch
	if !d.reorder {
		rel = max(rel, d.floor)
	}
	d.floor = max(d.floor, rel)
	p.release, p.seq = rel, d.seq
	d.seq++
	d.sched.push(p)
	head := d.sched[0] == p
	d.mu.Unlock()
	if head {
		select {
		case d.bell <- struct{}{}:
		default:
		}
	}
}

// routineRelease writes direction d's datagrams at their release times.
func (r *Relay) routineRelease(d *direction) {
	defer r.wg.Done()
	r.log.Debug("routineRelease started", "dir", d.dir.String())
	defer r.log.Debug("routineRelease stopped", "dir", d.dir.String())
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*packet, 0, releaseBatch)
	for {
		if r.isClosed() {
			return
		}
		d.mu.Lock()
		if len(d.sched) == 0 {
			d.mu.Unlock()
			select {
			case <-d.bell:
			case <-r.done:
				return
			}
			continue
		}
		now := r.now()
		if head := d.sched[0].release; head > now {
			d.mu.Unlock()
			r.waitUntil(d, timer, head)
			continue
		}
		for len(d.sched) > 0 && d.sched[0].release <= now && len(batch) < releaseBatch {
			batch = append(batch, d.sched.pop())
		}
		d.mu.Unlock()
		for i, p := range batch {
			r.write(d, p)
			batch[i] = nil
		}
		batch = batch[:0]
	}
}

// waitUntil returns at relay time until, or earlier when d's bell rings
// (a new head may be due sooner) or the relay closes.
func (r *Relay) waitUntil(d *direction, timer *time.Timer, until time.Duration) {
	for {
		left := until - r.now()
		if left <= 0 {
			return
		}
		coarse := r.opts.CoarseTimers
		if coarse || left > timerMargin {
			wait := left
			if !coarse {
				wait = left - timerMargin
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
				if coarse {
					return
				}
				continue
			case <-d.bell:
			case <-r.done:
			}
			timer.Stop()
			return
		}
		if spin := r.opts.SpinWindow; left > spin {
			preciseSleep(min(left-spin, sleepChunk))
			select {
			case <-d.bell:
				return
			case <-r.done:
				return
			default:
			}
			continue
		}
		for r.now() < until {
			// Spin through the last SpinWindow before the release time,
			// yielding so that the readers keep running: a spin that
			// holds its P starves them on a 2-core machine.
			runtime.Gosched()
		}
		return
	}
}

// write sends one released datagram and returns its buffer to the pool.
func (r *Relay) write(d *direction, p *packet) {
	st := &d.stats
	if r.down.Load() {
		st.outage.Add(1)
		putPacket(p)
		return
	}
	s := p.sess
	b := p.buf[:p.n]
	var err error
	if d.dir == Up {
		if s.udp != nil {
			_, err = s.udp.WriteToUDPAddrPort(b, r.upstream)
		} else {
			_, err = s.conn.WriteTo(b, r.upstreamAddr)
		}
	} else {
		if r.listenUDP != nil {
			_, err = r.listenUDP.WriteToUDPAddrPort(b, s.client)
		} else {
			_, err = r.listen.WriteTo(b, s.clientAddr)
		}
	}
	if err != nil {
		st.other.Add(1)
	} else {
		st.delivered.Add(1)
		st.deliveredBytes.Add(uint64(p.n))
		st.late.add(r.now() - p.release)
	}
	putPacket(p)
}

// routineExpire closes sessions idle for longer than IdleTimeout.
func (r *Relay) routineExpire() {
	defer r.wg.Done()
	r.log.Debug("routineExpire started")
	defer r.log.Debug("routineExpire stopped")
	every := max(r.opts.IdleTimeout/4, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		now := r.now()
		r.mu.Lock()
		for k, s := range r.sessions {
			if now-time.Duration(s.lastSeen.Load()) > r.opts.IdleTimeout {
				delete(r.sessions, k)
				s.close()
				r.log.Info("emu relay: client idle, session closed", "client", k.String())
			}
		}
		r.mu.Unlock()
	}
}

// dirCounters are the atomics behind DirStats.
type dirCounters struct {
	packets, bytes            atomic.Uint64
	delivered, deliveredBytes atomic.Uint64
	loss, queue, outage       atomic.Uint64
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

// readErrorPause slows a reader down after a socket error that is not a
// close (none is expected on UDP), so that a persistent one cannot spin.
func readErrorPause() { time.Sleep(time.Millisecond) }

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

// pktHeap is a binary min-heap of packets by (release, seq).
type pktHeap []*packet

func (h pktHeap) less(i, j int) bool {
	if h[i].release != h[j].release {
		return h[i].release < h[j].release
	}
	return h[i].seq < h[j].seq
}

func (h *pktHeap) push(p *packet) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *pktHeap) pop() *packet {
	s := *h
	p := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	for i := 0; ; {
		l, rt, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if rt < len(s) && s.less(rt, m) {
			m = rt
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return p
}
