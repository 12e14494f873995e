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
//
// Files: relay.go (options, lifecycle, public methods), relay_session.go
// (client sessions and the two readers), relay_release.go (the schedule
// and the release routine), relay_stats.go (counters and the lateness
// histogram).

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
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
	return NewLink(cfg, relayLinkSeed(r.opts.Seed, dir, gen))
}

// relayLinkSeed is the seed of a relay's model of direction dir, generation
// gen (0 for the first, one more for each SetConfig).
func relayLinkSeed(relaySeed uint64, dir Direction, gen int) uint64 {
	return seedFor(relaySeed, fmt.Sprintf("%s#%d", dir, gen))
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

// SetMaxPacket makes direction dir drop, silently, every datagram whose IP
// packet (payload + IP and UDP headers, as the models see it) is larger
// than bytes, as a path MTU black hole does: a router that cannot forward
// it and sends no ICMP error, or whose error is filtered (RFC 2923 §2.1,
// RFC 8899 §1.1). Drops count as DropTooBig. 0 (or less) removes the
// limit. It applies from the next datagram read; safe for concurrent use.
func (r *Relay) SetMaxPacket(dir Direction, bytes int) {
	if dir > Down {
		return
	}
	old := r.dirs[dir].maxPacket.Swap(int64(max(bytes, 0)))
	if old != int64(max(bytes, 0)) {
		r.log.Info("emu relay max packet size", "dir", dir.String(), "bytes", bytes)
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
