package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/quic-go/quic-go"
)

// Fleet hooks (docs/design.md "Fleet"): a concentrator tells its BGP
// speaker when a bond comes up or ends, and can drain its edges to other
// nodes; an edge can be pointed at another node and probe its home node.

// Application error codes of the fleet.
const (
	// codeDraining closes every path of a draining concentrator: the edge
	// moves to its next node at once rather than redialling this one.
	codeDraining = 0x107
	// codeMoved closes the edge's paths to a node it is leaving.
	codeMoved = 0x105
	// codeProbe closes an edge's probe of its home node: a QUIC handshake
	// and nothing else.
	codeProbe = 0x106
)

// ErrDraining is a path's end when the concentrator closed it because it
// is draining ([Concentrator.Drain]): the edge should move to another node.
var ErrDraining = errors.New("tunnel: concentrator is draining")

// ErrBusy is a dial's end when the concentrator refused the connection at
// once because it takes no more handshakes this moment (its handshake
// rate, or its source address's, is reached; conc_admit.go): the edge
// backs off, or tries its next node.
var ErrBusy = errors.New("tunnel: concentrator busy")

// IsRefusal reports whether err, from [EdgeOptions.OnPathEnd], means the
// node will not serve this edge now: it refused the credentials
// ([ErrUnauthorized]), is draining ([ErrDraining]) or is busy ([ErrBusy]).
func IsRefusal(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrDraining) || errors.Is(err, ErrBusy)
}

// isBusy reports whether a dial's error is the node's busy answer: QUIC's
// CONNECTION_REFUSED from the peer, which quic-go sends when the
// concentrator's admission refuses a connection (RFC 9000 §20.1).
func isBusy(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.Remote && te.ErrorCode == quic.ConnectionRefused
}

// fleetErr maps the close codes of the fleet and of a refusal to
// [ErrDraining] and [ErrUnauthorized], and a busy node's refusal to
// [ErrBusy]; other errors are returned as they are.
func fleetErr(err error) error {
	if isBusy(err) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote {
		switch ae.ErrorCode {
		case codeDraining:
			return fmt.Errorf("%w: %w", ErrDraining, err)
		case codeUnauthorized:
			return fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
	}
	return err
}

// bondLife counts the live path connections of one edge on a concentrator
// and calls OnBondUp on the first and OnBondDown after the last, in order:
// the count and the call are under one lock, so an up is never reported
// after the down that followed it.
type bondLife struct {
	mu   sync.Mutex
	live int
}

// pathUp is called when a path connection of e has been accepted.
func (c *Concentrator) pathUp(e *edgeEntry) {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	e.life.live++
	if e.life.live == 1 && c.opts.OnBondUp != nil {
		c.opts.OnBondUp(e.auth.ID, e.auth.AllowedPrefixes)
	}
}

// pathDown is called when a path connection of e has ended.
func (c *Concentrator) pathDown(e *edgeEntry) {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	e.life.live--
	if e.life.live == 0 && c.opts.OnBondDown != nil {
		c.opts.OnBondDown(e.auth.ID)
	}
}

// Drain stops accepting path connections and closes every connected one
// with the draining code, so that each edge moves to its next node at once
// ([ErrDraining] on the edge). OnBondDown follows for every bond that was
// up. The concentrator keeps its TUN open until Close, so packets of the
// edges already on their way are still delivered. Drain is idempotent.
func (c *Concentrator) Drain() {
	c.drainOnce.Do(func() {
		if c.ln != nil {
			c.ln.Close()
		}
		for _, e := range c.tab.Load().edges {
			e.bond.closePaths(codeDraining, "concentrator draining")
		}
		c.log.Info("draining: edges told to move")
	})
}

// SetConcentrator points every path of the edge at node (host:port):
// it closes the paths connected elsewhere, cuts short the dials and redial
// backoffs under way, so that each path dials node at once, and resets
// the bond's duplicate filter and FEC decoder, since node numbers its
// packets from its own sequence space. An uplink with its own Remote keeps
// it. It is how an edge moves between the nodes of a fleet; safe for
// concurrent use.
func (e *Edge) SetConcentrator(node string) {
	e.node.Store(&node)
	e.moved.fire()
	e.bond.resetPeer()
	e.bond.closePaths(codeMoved, "edge moving to another node")
}

// resetPeer forgets the receive state tied to the peer's sequence space.
func (b *Bond) resetPeer() {
	b.rx.Lock()
	b.rx.dedupe.reset()
	b.dec.Reset()
	b.reseq.reset() // the new node numbers its flows afresh
	b.rx.Unlock()
}

// moveSignal wakes the edge's dial loops when the edge moves to another
// node: wait's channel is closed by the next fire.
type moveSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (m *moveSignal) wait() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ch == nil {
		m.ch = make(chan struct{})
	}
	return m.ch
}

func (m *moveSignal) fire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ch != nil {
		close(m.ch)
	}
	m.ch = make(chan struct{})
}

// cancelOnMove calls cancel when the edge moves to another node, until
// the returned stop is called.
func (e *Edge) cancelOnMove(cancel context.CancelFunc) (stop func()) {
	return cancelWhen(e.moved.wait(), cancel)
}

// Concentrator returns the node the edge's paths dial now:
// [EdgeOptions.Concentrator] until [Edge.SetConcentrator] is called.
func (e *Edge) Concentrator() string {
	if n := e.node.Load(); n != nil {
		return *n
	}
	return e.opts.Concentrator
}

// Probe checks that node (host:port) completes a QUIC handshake over the
// edge's first uplink, then closes the connection with the probe code
// before any hello, so the node neither counts a path nor announces
// anything. It returns nil when the handshake succeeded within ctx, or
// the dial's error.
func (e *Edge) Probe(ctx context.Context, node string) error {
	raddr, err := net.ResolveUDPAddr("udp", node)
	if err != nil {
		return err
	}
	listen := e.opts.Listen
	if listen == nil {
		listen = ListenUplink
	}
	pc, err := listen(ctx, e.opts.Uplinks[0])
	if err != nil {
		return fmt.Errorf("opening the probe socket: %w", err)
	}
	tr := &quic.Transport{Conn: pc}
	defer func() { tr.Close(); pc.Close() }()
	conn, err := tr.Dial(ctx, raddr, e.res.tlsFor(e.opts.TLS, node), e.quicConfigFor(node, &recorder{}))
	if err != nil {
		return err
	}
	return conn.CloseWithError(codeProbe, "probe")
}

// isNodeProbe reports whether err ends a connection the edge opened as a
// probe of this node (Edge.Probe).
func isNodeProbe(err error) bool {
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorCode == codeProbe
}

// edgeTable is the concentrator's edge list: the entries by id and the
// downlink routes to their bonds, longest prefix first. It is immutable;
// SetEdges replaces it as a whole.
type edgeTable struct {
	edges  map[string]*edgeEntry
	routes []route
}

// newTable builds the table of edges. An edge of old with the same
// EdgeAuth keeps its entry (bond, paths and counters); any other gets a
// new bond. replaced lists the old entries not kept.
func (c *Concentrator) newTable(edges []EdgeAuth, old *edgeTable) (tab *edgeTable, replaced []*edgeEntry, err error) {
	tab = &edgeTable{edges: make(map[string]*edgeEntry, len(edges))}
	for _, ea := range edges {
		var prev *edgeEntry
		if old != nil {
			prev = old.edges[ea.ID]
		}
		e := prev
		if prev == nil || !sameAuth(prev.auth, ea) {
			b, err := newBond(ea.ID, c.opts.Device, bondOptions{mtu: c.opts.MTU, picker: c.opts.Picker, paths: c.opts.Paths, fec: c.opts.FEC,
				rules: c.opts.Rules, classify: c.opts.Classify, allowed: ea.AllowedPrefixes, log: c.log.With("edge", ea.ID), peer: &ea,
				peerMoved: c.peerMoved})
			if err != nil {
				return nil, nil, err
			}
			e = &edgeEntry{auth: ea, bond: b, life: &bondLife{}}
			if prev != nil {
				e.life = prev.life // OnBondUp/OnBondDown stay in step across the replacement
			}
		}
		tab.edges[ea.ID] = e
		for _, p := range ea.AllowedPrefixes {
			tab.routes = append(tab.routes, route{p.Masked(), e.bond})
		}
	}
	slices.SortFunc(tab.routes, func(a, b route) int { return b.prefix.Bits() - a.prefix.Bits() })
	if old != nil {
		for id, e := range old.edges {
			if tab.edges[id] != e {
				replaced = append(replaced, e)
			}
		}
	}
	return tab, replaced, nil
}

// sameAuth reports whether two entries of an edge list are equal.
func sameAuth(a, b EdgeAuth) bool {
	return a.ID == b.ID && string(a.Token) == string(b.Token) && a.CertCN == b.CertCN &&
		slices.Equal(a.AllowedPrefixes, b.AllowedPrefixes) && a.AllowEdgeRules == b.AllowEdgeRules &&
		slices.Equal(a.PolicyLabelKeys, b.PolicyLabelKeys)
}

// startBond starts the timers of e's bond (idle.go; its resequencer's
// flush among them) until e leaves the edge list (e.stop) or the
// concentrator closes.
func (c *Concentrator) startBond(e *edgeEntry) {
	e.stop = e.bond.stopTimers
	e.bond.startTimers(c.timers)
}

// SetEdges replaces the edge list, as a reload of the configuration does
// (every node of a fleet reads the same list). An edge whose entry is
// unchanged keeps its bond and paths. An edge that is new gets a bond; an
// edge whose entry changed (credentials, allowed prefixes, flags) gets a
// new bond and its paths are closed, so that it redials and is checked
// against the new entry; an edge no longer listed has its paths closed and
// is refused from then on. When a changed edge still has paths up,
// OnBondUp is called at once with its new prefixes. It returns the same
// errors as [NewConcentrator] for an invalid list, changing nothing; it
// must be called after Start.
func (c *Concentrator) SetEdges(edges []EdgeAuth) error {
	o := c.opts
	o.Edges = edges
	if err := o.validate(); err != nil {
		return fmt.Errorf("tunnel: edge list: %w", err)
	}
	c.setMu.Lock()
	defer c.setMu.Unlock()
	old := c.tab.Load()
	tab, replaced, err := c.newTable(edges, old)
	if err != nil {
		return fmt.Errorf("tunnel: edge list: %w", err)
	}
	for _, e := range tab.edges {
		if e.stop == nil {
			c.startBond(e)
		}
	}
	c.tab.Store(tab)
	for _, e := range replaced {
		e.bond.closePaths(codeShutdown, "edge list changed")
		e.stop()
		if ne := tab.edges[e.auth.ID]; ne != nil && c.opts.OnBondUp != nil {
			ne.life.mu.Lock()
			if ne.life.live > 0 {
				c.opts.OnBondUp(ne.auth.ID, ne.auth.AllowedPrefixes)
			}
			ne.life.mu.Unlock()
		}
	}
	c.log.Info("edge list replaced", "edges", len(tab.edges), "replaced_or_removed", len(replaced))
	return nil
}
