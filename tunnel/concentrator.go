package tunnel

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/tun"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// Concentrator is the cloud end: it accepts path connections from edges,
// authenticates each (token or client certificate), groups the paths of one
// edge into that edge's Bond, writes what arrives to its TUN, and routes
// packets read from its TUN to the bond whose allowed prefixes hold their
// destination.
type Concentrator struct {
	opts ConcentratorOptions
	log  *slog.Logger
	tab  atomic.Pointer[edgeTable] // the edges and their routes; replaced by SetEdges (fleet.go)

	tr *quic.Transport
	ln *quic.Listener

	drops          dropCounters // concentrator-scope reasons: TUN packets of no bond (DropNoRoute, DropLinkLocal)
	authFailed     atomic.Uint64
	lastRefusalLog atomic.Int64      // monoclock ns of the last refusal logged
	tdrops         transportCounters // what the QUIC transport dropped (conc_transport.go)

	// timers holds every timer of every bond and path (idle.go).
	timers *timerheap.Heap

	admit    *admission    // handshake bounds (conc_admit.go); set by Start
	keys     *serverKeys   // session-ticket and address-token keys (conc_admit.go)
	tls      *tls.Config   // opts.TLS with stable ticket keys; what the listener uses
	accepted atomic.Uint64 // connections that completed the handshake
	resumed  atomic.Uint64 // of those, the ones that resumed a TLS session

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	drainOnce sync.Once  // Drain (fleet.go)
	setMu     sync.Mutex // serialises SetEdges (fleet.go)
}

type edgeEntry struct {
	auth EdgeAuth
	bond *Bond
	life *bondLife // live path connections, for OnBondUp/OnBondDown (fleet.go)
	stop func()    // ends the bond's routines and timers; set by Start or SetEdges
}

type route struct {
	prefix netip.Prefix
	bond   *Bond
}

// NewConcentrator checks opts and returns a Concentrator that is not yet
// listening. It returns an error naming the first invalid option, including
// overlapping allowed prefixes of two edges.
func NewConcentrator(opts ConcentratorOptions) (*Concentrator, error) {
	opts.Paths, opts.FEC, opts.Handshakes = opts.Paths.withDefaults(), opts.FEC.withDefaults(), opts.Handshakes.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("tunnel: concentrator options: %w", err)
	}
	c := &Concentrator{opts: opts, log: orDiscard(opts.Logger), timers: timerheap.New(), admit: newAdmission(opts.Handshakes)}
	tab, _, err := c.newTable(opts.Edges, nil)
	if err != nil {
		return nil, fmt.Errorf("tunnel: concentrator: %w", err)
	}
	c.tab.Store(tab)
	return c, nil
}

func (o *ConcentratorOptions) validate() error {
	switch {
	case o.Device == nil:
		return errors.New("Device is required")
	case o.MTU < 576 || o.MTU > MTUFor(o.Paths.InitialPacketSize):
		return fmt.Errorf("MTU %d is outside 576..%d bytes", o.MTU, MTUFor(o.Paths.InitialPacketSize))
	case o.Conn == nil:
		return errors.New("Conn (the listening socket) is required")
	case o.TLS == nil:
		return errors.New("TLS is required")
	case len(o.Edges) == 0:
		return errors.New("at least one edge is required")
	}
	seen := map[string]bool{}
	var all []netip.Prefix
	for _, e := range o.Edges {
		switch {
		case e.ID == "" || len(e.ID) > maxNameLen || seen[e.ID]:
			return fmt.Errorf("edge id %q is empty, too long or repeated", e.ID)
		case (len(e.Token) == 0) == (e.CertCN == ""):
			return fmt.Errorf("edge %s: exactly one of Token and CertCN is required", e.ID)
		case len(e.AllowedPrefixes) == 0:
			return fmt.Errorf("edge %s: at least one allowed prefix is required", e.ID)
		}
		seen[e.ID] = true
		for _, p := range e.AllowedPrefixes {
			for _, q := range all {
				if p.Overlaps(q) {
					return fmt.Errorf("edge %s: allowed prefix %s overlaps %s of another edge", e.ID, p, q)
				}
			}
		}
		all = append(all, e.AllowedPrefixes...)
	}
	if err := o.FEC.validate(); err != nil {
		return err
	}
	if err := o.Handshakes.validate(); err != nil {
		return err
	}
	return o.Paths.validate()
}

// Start listens for edges and starts reading the TUN. It returns once the
// listener is up.
func (c *Concentrator) Start() error {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	resetKey := c.opts.StatelessResetKey
	if resetKey == nil {
		resetKey = resetKeyFromTLS(c.opts.TLS)
	}
	c.keys = newServerKeys(c.opts.TLS)
	c.tls = serverTLS(c.opts.TLS, c.keys)
	c.tr = &quic.Transport{
		Conn:              c.transportConn(),
		StatelessResetKey: resetKey,
		TokenGeneratorKey: c.keys.tokenKey(),
		Tracer:            &c.tdrops,
		// Admission (conc_admit.go). The tracer is created before the
		// edge is known; it reaches the path through the connection's
		// context once the hello is in.
		ConnContext:         c.connContext,
		VerifySourceAddress: func(a net.Addr) bool { return c.admit.verify(a, &c.tdrops.n[TransportRetry]) },
	}
	ln, err := c.tr.Listen(c.tls, quicConfig(c.opts.Paths, nil))
	if err != nil {
		c.tr.Close()
		return fmt.Errorf("tunnel: listen: %w", err)
	}
	c.ln = ln
	c.timers.Start()
	for _, e := range c.tab.Load().edges {
		c.startBond(e) // before any path of it can be accepted (startLiveness)
	}
	c.wg.Go(c.routineAccept)
	c.wg.Go(c.routineNonQUIC)
	c.wg.Go(c.routineGarbageLog)
	c.wg.Go(func() { tun.DrainEvents(c.opts.Device, func(ev tun.Event) { c.log.Debug("tun event", "event", ev) }) })
	c.wg.Go(func() { routineReadTUN(c.opts.Device, c.log, c.route) })
	return nil
}

// Close closes every connection, the listener, the socket and the TUN
// device, and waits for all goroutines to stop.
func (c *Concentrator) Close() error {
	if c.cancel == nil {
		c.opts.Conn.Close()
		return c.opts.Device.Close()
	}
	c.cancel()
	c.timers.Close()
	for _, e := range c.tab.Load().edges {
		e.bond.reseq.stop() // held packets go back to the pool
		e.bond.closePaths(codeShutdown, "concentrator shutting down")
	}
	c.ln.Close()
	c.tr.Close()
	c.opts.Conn.Close()
	err := c.opts.Device.Close()
	c.wg.Wait()
	return err
}

// Stats returns a snapshot of every configured edge's bond, sorted by edge id.
func (c *Concentrator) Stats() []BondStats {
	var out []BondStats
	for _, e := range c.tab.Load().edges {
		out = append(out, e.bond.Stats())
	}
	slices.SortFunc(out, func(a, b BondStats) int { return strings.Compare(a.EdgeID, b.EdgeID) })
	return out
}

// Addr returns the address the concentrator listens on.
func (c *Concentrator) Addr() net.Addr { return c.opts.Conn.LocalAddr() }

// Bond returns the bond of the edge with the given id, or nil.
func (c *Concentrator) Bond(edgeID string) *Bond {
	if e := c.tab.Load().edges[edgeID]; e != nil {
		return e.bond
	}
	return nil
}

// NoRoute returns the number of downlink packets dropped because no edge's
// allowed prefixes held their destination.
func (c *Concentrator) NoRoute() uint64 { return c.drops.get(DropNoRoute) }

// LinkLocal returns the number of packets read from the TUN for a
// link-local or link-scope multicast destination, which are not routed.
func (c *Concentrator) LinkLocal() uint64 { return c.drops.get(DropLinkLocal) }

// AuthFailures returns the number of path connections refused at the hello.
func (c *Concentrator) AuthFailures() uint64 { return c.authFailed.Load() }

// route finds the bond for a downlink packet by its destination address.
func (c *Concentrator) route(pkt []byte) *Bond {
	dst, ok := innerDest(pkt)
	if ok && linkScope(dst) { // not routed: see Bond.send
		c.drops.add(DropLinkLocal)
		return nil
	}
	if ok {
		for _, r := range c.tab.Load().routes {
			if r.prefix.Contains(dst) {
				return r.bond
			}
		}
	}
	c.drops.add(DropNoRoute)
	return nil
}

func (c *Concentrator) routineAccept() {
	c.log.Debug("routineAccept started")
	defer c.log.Debug("routineAccept stopped")
	for {
		conn, err := c.ln.Accept(c.ctx)
		if err != nil {
			return
		}
		c.wg.Go(func() { c.handle(conn) })
	}
}

// handle authenticates one path connection and serves it until it ends.
func (c *Concentrator) handle(conn *quic.Conn) {
	log := c.log.With("remote", conn.RemoteAddr())
	rec, _ := conn.Context().Value(recorderKey{}).(*recorder)
	if rec != nil {
		rec.accepted.Store(true)
		c.handshakeDone(rec)
	}
	c.accepted.Add(1)
	if conn.ConnectionState().TLS.DidResume {
		c.resumed.Add(1)
	}
	pc, err := c.accept(conn)
	if err != nil {
		if isNodeProbe(context.Cause(conn.Context())) { // an edge checking this node is up (fleet.go)
			return
		}
		if errors.Is(err, ErrUnauthorized) {
			c.authFailed.Add(1)
		} else {
			c.tdrops.n[TransportRefused].Add(1) // a bad hello; AuthFailures counts the rest
		}
		// An edge with a wrong credential redials forever: log at most one
		// refusal a second (all are counted).
		now := monoclock.Now()
		if last := c.lastRefusalLog.Load(); now-last >= int64(time.Second) && c.lastRefusalLog.CompareAndSwap(last, now) {
			log.Warn("path refused", "err", err, "refused_total", c.authFailed.Load())
		}
		return
	}
	p := pc.path
	log = log.With("edge", p.bond.edgeID, "path", p.name)
	log.Info("path up")
	e := c.tab.Load().edges[p.bond.edgeID]
	if e == nil || e.bond != p.bond { // removed or replaced by SetEdges meanwhile
		conn.CloseWithError(codeShutdown, "edge list changed")
		return
	}
	c.pathUp(e)
	defer c.pathDown(e)
	p.serve(c.ctx, conn, rec)
	if c.ctx.Err() == nil {
		level := slog.LevelInfo
		if p.connected() { // a newer connection replaced this one
			level = slog.LevelDebug
		}
		log.Log(c.ctx, level, "path down", "err", context.Cause(conn.Context()))
	}
}

// accept reads and checks the hello. On success the path is registered in
// its bond, the reply sent, and the path connection it serves returned;
// on failure the connection is closed.
func (c *Concentrator) accept(conn *quic.Conn) (*pathConn, error) {
	ctx, cancel := context.WithTimeout(conn.Context(), DefaultHandshakeTimeout)
	defer cancel()
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		conn.CloseWithError(codeProtocol, "no control stream")
		return nil, fmt.Errorf("waiting for the control stream: %w", err)
	}
	str.SetDeadline(time.Now().Add(DefaultHandshakeTimeout))
	var h ctrlmsg.Hello
	typ, body, err := ctrlmsg.Read(str)
	if err == nil && typ != ctrlmsg.TypeHello {
		err = fmt.Errorf("first control message is %q, not hello", typ)
	}
	if err == nil {
		err = json.Unmarshal(body, &h)
	}
	if err == nil {
		err = checkHello(&h)
	}
	if err != nil {
		conn.CloseWithError(codeProtocol, "bad hello")
		return nil, err
	}
	e := c.tab.Load().edges[h.EdgeID]
	if e == nil || !c.authorized(e, conn, h.Token) {
		ctrlmsg.Write(str, &ctrlmsg.HelloReply{Type: ctrlmsg.TypeHelloReply, Error: "not authorized"}) // the peer learns no reason
		str.Close()
		// Give the reply a moment to leave before the close overtakes it.
		time.AfterFunc(100*time.Millisecond, func() { conn.CloseWithError(codeUnauthorized, "not authorized") })
		reason := "wrong credential"
		if e == nil {
			reason = "unknown edge"
		}
		return nil, fmt.Errorf("%w: edge %q: %s", ErrUnauthorized, h.EdgeID, reason)
	}
	if e.bond.adoptBondID(h.BondID) {
		e.bond.closePaths(codeReplaced, "edge restarted")
	}
	p, ok := e.bond.pathFor(h.Path, h.Labels)
	if !ok {
		ctrlmsg.Write(str, &ctrlmsg.HelloReply{Type: ctrlmsg.TypeHelloReply, Error: "too many paths"})
		conn.CloseWithError(codeProtocol, "too many paths")
		return nil, fmt.Errorf("edge %s: more than %d paths", h.EdgeID, maxPaths)
	}
	p.state.SetLEOReconf(leoFromWire(h.LEO)) // the uplink's schedule acts on the downlink too
	caps := ctrlmsg.CapsOf(h.Control)        // the concentrator takes every capability it knows
	e.bond.peerTags.Store(caps&ctrlmsg.CapFlowTags != 0)
	if err := ctrlmsg.Write(str, &ctrlmsg.HelloReply{Type: ctrlmsg.TypeHelloReply, OK: true, MTU: c.opts.MTU, Control: caps.Names()}); err != nil {
		conn.CloseWithError(codeProtocol, "hello reply failed")
		return nil, err
	}
	str.SetDeadline(time.Time{})
	c.wg.Go(func() { e.bond.ctl.routineServeControl(conn, str, p, h.BondID, caps) }) // later control messages (ctrl_conc.go)
	return &p.pc, nil
}

// authorized checks the edge's credential: its token, compared in constant
// time, or the CommonName of a client certificate the TLS stack verified.
func (c *Concentrator) authorized(e *edgeEntry, conn *quic.Conn, token []byte) bool {
	if e.auth.CertCN != "" {
		certs := conn.ConnectionState().TLS.VerifiedChains
		return len(certs) > 0 && len(certs[0]) > 0 && certs[0][0].Subject.CommonName == e.auth.CertCN
	}
	return len(token) > 0 && subtle.ConstantTimeCompare(token, e.auth.Token) == 1
}
