package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/fleet"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/tunnel"
)

// The fleet (docs/design.md "Fleet", docs/operations.md "Running a
// fleet"): a concentrator node announces the prefixes of the edges whose
// bond it holds over BGP and drains its edges to other nodes before it
// stops; an edge orders the nodes by rendezvous hashing and moves between
// them with fleet.Failover.

// Fleet timing.
const (
	// fleetTick is how often the edge's failover machine samples the bond.
	fleetTick = 250 * time.Millisecond
	// homeProbeEvery is how often an edge away from home probes it.
	homeProbeEvery = 5 * time.Second
	// homeProbeTimeout bounds one probe of home.
	homeProbeTimeout = 3 * time.Second
	// bgpStopTimeout bounds the graceful stop of the BGP speaker.
	bgpStopTimeout = 2 * time.Second
)

// ---------------------------------------------------------------------------
// Concentrator node

// fleetNode is a concentrator with a BGP speaker. Close drains: the edges
// are told to move (their bonds end here, which withdraws their prefixes),
// then the speaker withdraws what is left and closes its sessions, then
// the concentrator closes.
type fleetNode struct {
	*tunnel.Concentrator
	speaker *fleet.Speaker
	log     *slog.Logger

	mu       sync.Mutex
	draining bool
}

// newBondHooks returns the OnBondUp and OnBondDown hooks that announce and
// withdraw through the running speaker sp. After a drain the speaker is
// stopped and a failure (fleet.ErrNotStarted) is not worth a warning.
func newBondHooks(sp *fleet.Speaker, log *slog.Logger) (func(string, []netip.Prefix), func(string)) {
	up := func(id string, ps []netip.Prefix) {
		if err := sp.Announce(id, masked(ps)); err != nil && !errors.Is(err, fleet.ErrNotStarted) {
			log.Warn("bgp: announce failed", "edge", id, "err", err)
		}
	}
	down := func(id string) {
		if err := sp.Withdraw(id); err != nil && !errors.Is(err, fleet.ErrNotStarted) {
			log.Warn("bgp: withdraw failed", "edge", id, "err", err)
		}
	}
	return up, down
}

func masked(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Masked()
	}
	return out
}

// startSpeaker builds and starts the node's BGP speaker from cfg.
func startSpeaker(cfg *config.Config, log *slog.Logger) (*fleet.Speaker, error) {
	pw, err := cfg.LoadBGPPasswords()
	if err != nil {
		return nil, err
	}
	fc := cfg.Concentrator.BGP.Fleet(pw)
	fc.Logger = log.With("component", "bgp")
	sp, err := fleet.New(fc)
	if err != nil {
		return nil, err
	}
	if err := sp.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("bgp: %w", err)
	}
	log.Info("bgp speaker started", "local_as", fc.LocalAS, "router_id", fc.RouterID, "neighbors", len(fc.Neighbors))
	return sp, nil
}

// Drain tells every edge to move, withdraws every prefix and stops the
// speaker; the node keeps running (and refusing edges) until Close.
func (n *fleetNode) Drain() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.draining {
		return
	}
	n.draining = true
	n.log.Info("draining: moving the edges to other nodes and withdrawing their prefixes")
	n.Concentrator.Drain()
	if n.speaker != nil {
		ctx, cancel := context.WithTimeout(context.Background(), bgpStopTimeout)
		defer cancel()
		if err := n.speaker.Stop(ctx, true); err != nil {
			n.log.Warn("bgp: graceful stop", "err", err)
		}
	}
}

// reloadEdges reads the config file again and replaces the edge list
// (tunnel.Concentrator.SetEdges), as SIGHUP does: every node of a fleet
// reads the same list. It routes the prefixes of new edges into the TUN
// device tunName. A file that does not load, or a list the tunnel refuses,
// is logged and the running list stays. Other changes of the file (the
// bgp section, listen, ...) need a restart.
func (n *fleetNode) reloadEdges(file, tunName string) {
	cfg, err := config.Load(file)
	if err == nil && cfg.Concentrator == nil {
		err = errors.New("not a concentrator config any more")
	}
	var edges []tunnel.EdgeAuth
	if err == nil {
		edges, err = edgeAuths(cfg)
	}
	if err == nil {
		err = n.SetEdges(edges)
	}
	if err != nil {
		n.log.Error("SIGHUP: edge list not reloaded; the running one stays", "file", file, "err", err)
		return
	}
	if err := routeIntoTUN(tunName, tunRoutes(cfg)); err != nil {
		n.log.Warn("SIGHUP: routing the edges' prefixes into the TUN", "err", err)
	}
	n.log.Info("SIGHUP: edge list reloaded", "file", file, "edges", len(edges))
}

// routeIntoTUN adds (or keeps) a route into the TUN device for each prefix.
func routeIntoTUN(dev string, prefixes []netip.Prefix) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range prefixes {
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := netlink.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Close closes the concentrator; a node with a BGP speaker drains first,
// so that its edges move at once and the routers follow them.
func (n *fleetNode) Close() error {
	if n.speaker != nil {
		n.Drain()
	}
	return n.Concentrator.Close()
}

// bgpStatus reports the speaker; nil without one.
func (n *fleetNode) bgpStatus() *status.BGP {
	if n.speaker == nil {
		return nil
	}
	st := n.speaker.Stats()
	now := time.Now()
	b := &status.BGP{Running: st.Running, Uptime: st.Uptime, Edges: st.Edges, Prefixes: st.Prefixes,
		AnnouncedTotal: st.AnnouncedTotal, WithdrawnTotal: st.WithdrawnTotal, Errors: st.Errors}
	n.mu.Lock()
	b.Draining = n.draining
	n.mu.Unlock()
	for _, nb := range st.Neighbors {
		b.Neighbors = append(b.Neighbors, status.Neighbor{Address: nb.Address, AS: nb.AS, State: nb.State, Uptime: nb.Uptime(now),
			Established: nb.Established, Drops: nb.Drops, NotificationsSent: nb.NotificationsSent,
			NotificationsReceived: nb.NotificationsReceived, LastError: nb.LastError})
	}
	return b
}

// ---------------------------------------------------------------------------
// Edge

// edgeNodes returns the fleet's nodes named by the edge config: the list,
// or the addresses of a single DNS name (each with its port; those of the
// first address's family only), or the one address. lookup resolves a host name (net.DefaultResolver.LookupHost).
func edgeNodes(ctx context.Context, ec *config.EdgeConfig, lookup func(context.Context, string) ([]string, error)) ([]string, error) {
	if len(ec.Concentrators) > 0 {
		return ec.Concentrators, nil
	}
	host, port, err := net.SplitHostPort(ec.Concentrator)
	if err != nil {
		return nil, fmt.Errorf("edge.concentrator: %w", err)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return []string{ec.Concentrator}, nil
	}
	addrs, err := lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return []string{ec.Concentrator}, nil // not resolving yet: dial the name, as a single node does
	}
	// Only the family of the first address: a node with an A and an AAAA
	// record is one node, not two.
	first, _ := netip.ParseAddr(addrs[0])
	var nodes []string
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() == first.Is4() {
			nodes = append(nodes, net.JoinHostPort(a, port))
		}
	}
	if len(nodes) <= 1 {
		return []string{ec.Concentrator}, nil // one node: dial the name
	}
	return nodes, nil
}

// edgeFleetFor sets up failover for an edge config with several nodes: it
// orders them (fleet.Order on the edge id), points eo at home and hooks
// OnPathEnd. With one node it returns nil and leaves eo as it is.
func edgeFleetFor(ec *config.EdgeConfig, eo *tunnel.EdgeOptions, log *slog.Logger) *edgeFleet {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := edgeNodes(ctx, ec, net.DefaultResolver.LookupHost)
	if err != nil || len(nodes) < 2 {
		return nil
	}
	nodes = fleet.Order(ec.ID, nodes)
	f := newEdgeFleet(nodes, ec.Failover, log)
	eo.Concentrator, eo.OnPathEnd = nodes[0], f.onPathEnd
	log.Info("fleet: node order", "home", nodes[0], "nodes", nodes)
	return f
}

// edgeFleet drives an edge's moves between nodes with fleet.Failover.
type edgeFleet struct {
	e     *tunnel.Edge
	nodes []string // home first
	log   *slog.Logger
	fo    *fleet.Failover
	ev    chan nodeEvent // refusals and probe results

	mu      sync.Mutex
	cur     int
	moves   map[string]uint64
	movedAt time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// nodeEvent is an event about one node, from a path's end or a probe.
type nodeEvent struct {
	node string
	ev   fleet.Event
}

// newEdgeFleet returns the driver for nodes (already in the edge's order,
// home first). Its onPathEnd is the edge's EdgeOptions.OnPathEnd; start
// it with run once the edge exists.
func newEdgeFleet(nodes []string, fc config.FailoverConfig, log *slog.Logger) *edgeFleet {
	return &edgeFleet{nodes: nodes, log: log, moves: map[string]uint64{}, ev: make(chan nodeEvent, 64),
		fo: fleet.NewFailover(fleet.FailoverConfig{Nodes: nodes, UnreachableAfter: fc.UnreachableAfter, HomeHoldDown: fc.HomeHoldDown}, time.Now())}
}

// onPathEnd feeds a refusal by node (credentials, draining) to the machine.
func (f *edgeFleet) onPathEnd(_, node string, err error) {
	if tunnel.IsRefusal(err) {
		select {
		case f.ev <- nodeEvent{node, fleet.Refused}:
		default: // the machine is behind; a refusal repeats with the next dial
		}
	}
}

// start runs the driver until Close.
func (f *edgeFleet) start(e *tunnel.Edge) {
	f.e = e
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Go(func() { f.run(ctx) })
}

func (f *edgeFleet) run(ctx context.Context) {
	tick := time.NewTicker(fleetTick)
	defer tick.Stop()
	probe := time.NewTicker(homeProbeEvery)
	defer probe.Stop()
	probing := false
	for {
		var d fleet.Decision
		now := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ev := fleet.Down
			if bondUp(f.e.Bond().Stats()) {
				ev = fleet.Up
			}
			d = f.fo.Step(now, ev)
		case <-probe.C:
			if f.fo.Current() == 0 || probing {
				continue
			}
			probing = true
			f.wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, homeProbeTimeout)
				defer cancel()
				ev := fleet.HomeUp
				if err := f.e.Probe(pctx, f.nodes[0]); err != nil {
					ev = fleet.HomeDown
					f.log.Debug("fleet: home probe failed", "home", f.nodes[0], "err", err)
				}
				select {
				case f.ev <- nodeEvent{f.nodes[0], ev}:
				case <-ctx.Done():
				}
			})
			continue
		case x := <-f.ev:
			switch x.ev {
			case fleet.HomeUp, fleet.HomeDown:
				probing = false
			case fleet.Refused:
				if cur := f.fo.Current(); cur < 0 || f.nodes[cur] != x.node {
					continue // a path of a node the edge has already left
				}
			}
			d = f.fo.Step(now, x.ev)
		}
		if d.Moved {
			f.move(d, now)
		}
	}
}

// move points the edge's paths at the decision's node.
func (f *edgeFleet) move(d fleet.Decision, now time.Time) {
	f.mu.Lock()
	from := f.nodes[f.cur]
	f.cur = d.Node
	f.moves[d.Reason]++
	f.movedAt = now
	f.mu.Unlock()
	f.log.Warn("fleet: moving to another node", "from", from, "to", f.nodes[d.Node], "reason", d.Reason, "home", d.Node == 0)
	f.e.SetConcentrator(f.nodes[d.Node])
}

// bondUp reports whether any path of the bond is connected.
func bondUp(b tunnel.BondStats) bool {
	for _, p := range b.Paths {
		if p.Conn != nil {
			return true
		}
	}
	return false
}

// status reports the edge's place in the fleet.
func (f *edgeFleet) status() *status.EdgeNodes {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &status.EdgeNodes{Nodes: f.nodes, Current: f.nodes[f.cur], AtHome: f.cur == 0, MovedAt: f.movedAt}
	if len(f.moves) > 0 {
		s.Moves = make(map[string]uint64, len(f.moves))
		for k, v := range f.moves {
			s.Moves[k] = v
		}
	}
	return s
}

func (f *edgeFleet) stop() {
	if f.cancel != nil {
		f.cancel()
		f.wg.Wait()
	}
}

// fleetEdge is an edge daemon with several nodes.
type fleetEdge struct {
	Daemon // *tunnel.Edge or edgeWithDownlink
	f      *edgeFleet
}

func (d fleetEdge) Close() error { d.f.stop(); return d.Daemon.Close() }

func (d fleetEdge) Bond() *tunnel.Bond { return d.Daemon.(interface{ Bond() *tunnel.Bond }).Bond() }
