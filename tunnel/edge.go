package tunnel

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
	"golang.org/x/sys/unix"

	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// Edge is the vehicle end of a bond: it dials one QUIC connection per
// uplink to the concentrator (pathconn.go), through its own
// quic.Transport on a UDP socket bound to that uplink, and re-dials a lost
// one with exponential backoff.
// The bond lives while any path is up.
type Edge struct {
	opts   EdgeOptions
	log    *slog.Logger
	bond   *Bond
	bondID uint64
	paths  []*path // one per uplink, in configuration order

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	timers *timerheap.Heap        // every timer of the bond and its paths (idle.go)
	ctl    edgeControl            // the control plane (ctrl_edge.go)
	node   atomic.Pointer[string] // the node dialled, once SetConcentrator is called (fleet.go)
	moved  moveSignal             // fired by SetConcentrator (fleet.go)
	kicks  []moveSignal           // one per uplink, fired by Kick (redial.go)
	res    *resumeState           // session tickets and address tokens per node (edge_resume.go)
}

// NewEdge checks opts and returns an Edge that is not yet running. It
// returns an error naming the first missing or invalid option.
func NewEdge(opts EdgeOptions) (*Edge, error) {
	opts.Paths, opts.FEC = opts.Paths.withDefaults(), opts.FEC.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("tunnel: edge options: %w", err)
	}
	var id [8]byte
	if _, err := crand.Read(id[:]); err != nil {
		return nil, err
	}
	e := &Edge{opts: opts, log: orDiscard(opts.Logger), bondID: binary.BigEndian.Uint64(id[:]) >> 2, timers: timerheap.New(), res: newResumeState()}
	bond, err := newBond(opts.ID, opts.Device, bondOptions{mtu: opts.MTU, picker: opts.Picker, paths: opts.Paths,
		fec: opts.FEC, rules: opts.Rules, classify: opts.Classify, log: e.log, setTUNMTU: opts.SetTUNMTU, keepalives: true})
	if err != nil {
		return nil, fmt.Errorf("tunnel: edge: %w", err)
	}
	e.bond = bond
	e.bond.adoptBondID(e.bondID)
	for _, u := range opts.Uplinks {
		p, _ := e.bond.pathFor(u.Name, u.Labels)
		p.state.SetLEOReconf(u.LEOReconf) // annotation providers and budget (policy)
		p.state.SetBudget(u.Budget)
		e.paths = append(e.paths, p)
	}
	e.kicks = make([]moveSignal, len(e.paths))
	return e, nil
}

func (o *EdgeOptions) validate() error {
	switch {
	case o.ID == "" || len(o.ID) > maxNameLen:
		return errors.New("ID is required (at most 64 bytes)")
	case o.Device == nil:
		return errors.New("Device is required")
	case o.MTU < 576:
		return fmt.Errorf("MTU %d is below 576 bytes", o.MTU)
	case o.MTU > MTUFor(o.Paths.InitialPacketSize):
		return fmt.Errorf("MTU %d exceeds the %d bytes a datagram carries with %d-byte QUIC packets",
			o.MTU, MTUFor(o.Paths.InitialPacketSize), o.Paths.InitialPacketSize)
	case o.Concentrator == "":
		return errors.New("Concentrator address is required")
	case o.TLS == nil:
		return errors.New("TLS is required")
	case len(o.Uplinks) == 0:
		return errors.New("at least one uplink is required")
	case len(o.Uplinks) > maxPaths:
		return fmt.Errorf("%d uplinks, at most %d", len(o.Uplinks), maxPaths)
	}
	seen := map[string]bool{}
	for _, u := range o.Uplinks {
		if u.Name == "" || len(u.Name) > maxNameLen || seen[u.Name] {
			return fmt.Errorf("uplink name %q is empty, too long or repeated", u.Name)
		}
		seen[u.Name] = true
		if u.LEOReconf != nil {
			if err := u.LEOReconf.Validate(); err != nil {
				return fmt.Errorf("uplink %s: %w", u.Name, err) // the concentrator would refuse its hello
			}
		}
	}
	if err := o.FEC.validate(); err != nil {
		return err
	}
	return o.Paths.validate()
}

// Bond returns the edge's bond.
func (e *Edge) Bond() *Bond { return e.bond }

// Start starts the dial loop of every uplink and the TUN reader. It returns
// at once; paths come up in the background (see Bond.Stats).
func (e *Edge) Start() {
	e.ctx, e.cancel = context.WithCancel(context.Background())
	// The timers first: a path that comes up arms its liveness timer in
	// the bond's heap, and a packet from TUN wakes the bond's timers.
	e.timers.Start()
	e.bond.idle.onWake = e.ctl.ring // path state reports resume (ctrl_edge.go)
	e.bond.startTimers(e.timers)
	for i, p := range e.paths {
		u := e.opts.Uplinks[i]
		e.wg.Go(func() { e.routineDial(e.ctx, p, u, &e.kicks[i]) })
	}
	e.wg.Go(func() { tun.DrainEvents(e.opts.Device, func(ev tun.Event) { e.log.Debug("tun event", "event", ev) }) })
	e.wg.Go(func() { routineReadTUN(e.opts.Device, e.log, func([]byte) *Bond { return e.bond }) })
}

// Close closes every connection and the TUN device, and waits for all of the
// edge's goroutines to stop.
func (e *Edge) Close() error {
	if e.cancel == nil {
		return e.opts.Device.Close()
	}
	e.cancel()
	e.bond.stopTimers()
	e.timers.Close()
	e.bond.closePaths(codeShutdown, "edge shutting down")
	err := e.opts.Device.Close()
	e.wg.Wait()
	return err
}

// routineDial keeps an uplink's path connected until ctx ends: dial,
// serve until the connection ends, back off (redialBackoff), dial again.
// A kick (Edge.Kick, kick is the uplink's signal) ends the backoff and
// restarts a handshake under way.
func (e *Edge) routineDial(ctx context.Context, p *path, u UplinkOptions, kick *moveSignal) {
	log := e.log.With("path", u.Name)
	log.Debug("routineDial started")
	defer log.Debug("routineDial stopped")
	backoff := e.opts.Paths.RedialMin
	attempt := DefaultHandshakeTimeout
	failures := 0
	var downSince time.Time // when the path's last connection ended; zero before the first
	for ctx.Err() == nil {
		node := e.Concentrator() // for OnPathEnd
		kicked := kick.wait()    // closed by the next kick
		moved := e.moved.wait()  // closed by the next move (SetConcentrator)
		conn, closeConn, rec, err := e.dial(ctx, u, attempt, kicked)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if closed(kicked) { // the uplink came back while dialling: start over now
				log.Debug("uplink kicked: dialling again at once", "err", err)
				backoff = e.opts.Paths.RedialMin
				continue
			}
			p.setErr(err)
			if e.opts.OnPathEnd != nil {
				e.opts.OnPathEnd(u.Name, node, fleetErr(err))
			}
			// Warn once per outage; every retry is logged at debug level.
			level := slog.LevelDebug
			if failures == 0 {
				level = slog.LevelWarn
			}
			failures++
			busy := isBusy(err) // the node refused at once: too many handshakes (conc_admit.go)
			if busy {
				backoff = busyBackoff(backoff, e.opts.Paths.RedialMin, e.opts.Paths.RedialMax)
			}
			log.Log(ctx, level, "path dial failed", "err", err, "attempt", failures, "retry_in", backoff)
			// Jitter keeps the uplinks of many edges from redialling in step.
			sleep := backoff/2 + rand.N(backoff/2+1)
			if busy {
				sleep = rand.N(backoff + 1)
			}
			mv := e.moved.wait()
			if e.Concentrator() != node { // moved while dialling: dial the new node now
				if !busy {
					backoff = e.opts.Paths.RedialMin
				}
				continue
			}
			select {
			case <-time.After(sleep):
				if !busy {
					backoff = redialBackoff(backoff, e.opts.Paths.RedialMin, e.opts.Paths.RedialMax, sinceOrNever(downSince))
				}
			case <-mv:
				if !busy { // a busy node's backoff carries over: the next node may be busy too
					backoff = e.opts.Paths.RedialMin
				}
			case <-kicked:
				log.Debug("uplink kicked: dialling at once")
				backoff = e.opts.Paths.RedialMin
			case <-ctx.Done():
				return
			}
			attempt = min(2*attempt, DefaultHandshakeTimeout)
			continue
		}
		log.Info("path up", "local", conn.LocalAddr(), "remote", conn.RemoteAddr(), "attempts", failures+1)
		backoff, attempt, failures = e.opts.Paths.RedialMin, DefaultHandshakeTimeout, 0
		// A move closes the paths it finds up; one that came while this
		// dial finished its hello found no connection here yet: close
		// this one too, then or whenever the move comes while it serves.
		stopMoved := cancelWhen(moved, func() { conn.CloseWithError(codeMoved, "edge moving to another node") })
		p.serve(ctx, conn, rec)
		stopMoved()
		cause := context.Cause(conn.Context())
		closeConn()
		downSince = time.Now()
		if e.opts.OnPathEnd != nil && ctx.Err() == nil {
			e.opts.OnPathEnd(u.Name, node, fleetErr(cause))
		}
		if fastRedial(cause) {
			// The concentrator restarted, shut down or fell silent
			// (liveness.go): it is likely back within a second, so retry
			// soon, with short attempts (each one's Initial goes out at once).
			backoff = min(fastRedialMin, backoff)
			attempt = min(max(fastAttemptMin, fastAttemptPerRTT*time.Duration(p.pc.srtt.Load())), DefaultHandshakeTimeout)
		}
		if ctx.Err() == nil { // not a shutdown
			p.setErr(cause)
			log.Warn("path down", "err", cause, "presumed_lost", p.presumeLost())
		}
	}
}

// dial opens the uplink's socket, dials the concentrator over it and sends
// the hello. closeConn releases the transport and the socket.
// DefaultHandshakeTimeout bounds the handshake and the hello together;
// attempt, when shorter, bounds the wait for the concentrator's first
// packet: a silent concentrator is dialled afresh sooner (a fast redial),
// while one that answers, however loaded, keeps its handshake (cutting it
// short would only start it again, and a loaded node would spend itself
// on handshakes their edges have given up). Closing kicked cuts the
// handshake (not the hello) short.
func (e *Edge) dial(ctx context.Context, u UplinkOptions, attempt time.Duration, kicked <-chan struct{}) (conn *quic.Conn, closeConn func(), rec *recorder, err error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
	defer cancel()
	defer e.cancelOnMove(cancel)() // a move cuts the dial short (fleet.go)
	remote := e.Concentrator()
	if u.Remote != "" {
		remote = u.Remote
	}
	raddr, err := net.ResolveUDPAddr("udp", remote)
	if err != nil {
		return nil, nil, nil, err
	}
	listen := e.opts.Listen
	if listen == nil {
		listen = ListenUplink
	}
	pc, err := listen(ctx, u)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening the uplink socket: %w", err)
	}
	tr := &quic.Transport{Conn: pc}
	closeConn = func() { tr.Close(); pc.Close() }
	r := &recorder{} // not rec, which the returns below set to nil under the timer
	hctx, hcancel := context.WithCancelCause(ctx)
	stop := cancelWhen(kicked, func() { hcancel(nil) })
	if attempt < DefaultHandshakeTimeout {
		silent := time.AfterFunc(attempt, func() {
			if !r.answered.Load() {
				hcancel(errSilentNode)
			}
		})
		defer silent.Stop()
	}
	conn, err = tr.Dial(hctx, raddr, e.res.tlsFor(e.opts.TLS, remote), e.quicConfigFor(remote, r))
	stop()
	cause := context.Cause(hctx)
	hcancel(nil)
	if err != nil {
		closeConn()
		switch {
		case cause == errSilentNode:
			err = fmt.Errorf("no answer from %s within %s (dialling again)", remote, attempt)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == context.DeadlineExceeded:
			err = fmt.Errorf("no QUIC handshake with %s within %s (UDP blocked on the way, concentrator down, or the path cannot carry QUIC packets of %d bytes + 28)",
				remote, DefaultHandshakeTimeout, e.opts.Paths.InitialPacketSize)
		}
		return nil, nil, nil, err
	}
	if err := e.hello(ctx, conn, u); err != nil {
		conn.CloseWithError(codeProtocol, "hello failed")
		closeConn()
		return nil, nil, nil, err
	}
	return conn, closeConn, r, nil
}

// hello announces the path on a new control stream and waits for the reply.
func (e *Edge) hello(ctx context.Context, conn *quic.Conn, u UplinkOptions) error {
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return unauthorizedOr(err)
	}
	deadline, _ := ctx.Deadline()
	str.SetDeadline(deadline)
	// Shutdown must not wait for the reply: cut the stream's deadline short.
	defer context.AfterFunc(ctx, func() { str.SetDeadline(time.Now()) })()
	err = ctrlmsg.Write(str, &ctrlmsg.Hello{Type: ctrlmsg.TypeHello, Version: Version, EdgeID: e.opts.ID, BondID: e.bondID,
		Path: u.Name, Labels: u.Labels, Token: e.opts.Token, Control: ctrlmsg.CapsAll.Names(), LEO: leoToWire(u.LEOReconf)})
	if err != nil {
		return unauthorizedOr(err)
	}
	typ, body, err := ctrlmsg.Read(str)
	if err != nil {
		return unauthorizedOr(err)
	}
	var r ctrlmsg.HelloReply
	if typ != ctrlmsg.TypeHelloReply || json.Unmarshal(body, &r) != nil {
		return errors.New("concentrator sent no hello reply")
	}
	if !r.OK {
		return ErrUnauthorized
	}
	if r.MTU != 0 && r.MTU != e.opts.MTU {
		e.log.Warn("edge and concentrator TUN MTUs differ; the smaller one limits each direction",
			"path", u.Name, "edge_mtu", e.opts.MTU, "concentrator_mtu", r.MTU)
	}
	str.SetDeadline(time.Time{})
	caps := ctrlmsg.CapsOf(r.Control) & ctrlmsg.CapsAll
	e.bond.peerTags.Store(caps&ctrlmsg.CapFlowTags != 0)
	// The stream stays open for the control plane (ctrl_edge.go).
	e.attachControl(conn, str, u.Name, caps)
	return nil
}

// unauthorizedOr maps a connection closed by the concentrator with
// codeUnauthorized to ErrUnauthorized.
func unauthorizedOr(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.ErrorCode == codeUnauthorized {
		return ErrUnauthorized
	}
	return err
}

// datagramReceiveQueue is the length of quic-go's DATAGRAM receive queue
// on every path connection (quic.Config.DatagramReceiveQueueLen).
const datagramReceiveQueue = 1024

// quicConfig returns the QUIC configuration of one path connection; rec is
// its recorder, or nil on the concentrator, where the connection's context
// carries it.
func quicConfig(o PathOptions, rec *recorder) *quic.Config {
	c := &quic.Config{
		EnableDatagrams: true,
		// bondd sends the keepalives (liveness.go, idle.go); quic-go's
		// idle timeout is a backstop past an idle bond's keepalive.
		KeepAlivePeriod:      0,
		MaxIdleTimeout:       o.IdleKeepalive + o.IdleTimeout,
		HandshakeIdleTimeout: DefaultHandshakeTimeout,
		InitialPacketSize:    uint16(o.InitialPacketSize),
		// Every datagram bondd sends fits the Initial packet size, which
		// the padded handshake proved (MTUFor; bondd's own DPLPMTUD,
		// pmtu.go, watches for black holes below it). quic-go's search
		// above it would only add about five 1,400-byte probes a
		// connection, each way, and on an asleep bond one probe at each
		// idle keepalive for a minute after every (re)connect.
		DisablePathMTUDiscovery: true,
		MaxIncomingStreams:      4,
		MaxIncomingUniStreams:   -1,
		// A burst the TUN reader hands over faster than this end reads
		// must not overflow quic-go's receive queue (upstream: 128).
		DatagramReceiveQueueLen: datagramReceiveQueue,
		// The controller also hears each packet sent and received for the
		// connection's recorder (tracer.go): no qlog events to build.
		CongestionControl: ccFactory(rec), // cc.go
	}
	if o.QlogDir != "" {
		c.Tracer = func(_ context.Context, isClient bool, odcid quic.ConnectionID) qlogwriter.Trace {
			return &qlogFile{dir: o.QlogDir, isClient: isClient, odcid: odcid}
		}
	}
	return c
}

// quicConfigFor returns the QUIC configuration of a path connection to
// node: quicConfig with the node's address tokens (edge_resume.go).
func (e *Edge) quicConfigFor(node string, rec *recorder) *quic.Config {
	c := quicConfig(e.opts.Paths, rec)
	c.TokenStore = e.res.tokenStore(node)
	return c
}

// ListenUplink is the default ListenFunc: a UDP socket bound to u.Bind (port
// chosen by the kernel) and, when u.Interface is set, to that interface with
// SO_BINDTODEVICE (needs CAP_NET_RAW).
func ListenUplink(ctx context.Context, u UplinkOptions) (net.PacketConn, error) {
	lc := net.ListenConfig{}
	if u.Interface != "" {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), u.Interface) }); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("SO_BINDTODEVICE %s: %w", u.Interface, serr)
			}
			return nil
		}
	}
	addr := ":0"
	if u.Bind.IsValid() {
		addr = net.JoinHostPort(u.Bind.String(), "0")
	}
	return lc.ListenPacket(ctx, "udp", addr)
}
