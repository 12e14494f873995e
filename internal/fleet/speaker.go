package fleet

// The speaker: a GoBGP server that originates one route per allowed prefix
// of each edge the node holds, with the node as next hop, and nothing else.
//
// Lifecycle: New → Start (GoBGP's Serve goroutine, StartBgp, one AddPeer per
// neighbour, a peer-event watcher) → Announce/Withdraw as bonds come and go
// → WithdrawAll, a short flush, Stop. mu serialises every call into GoBGP so
// that the edges/owner tables always match what GoBGP originates.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Speaker announces the allowed prefixes of the edges a concentrator node
// holds to the site's routers over BGP. Create it with [New]; its methods
// are safe for concurrent use. It never installs routes and ignores every
// route the routers send it.
type Speaker struct {
	cfg   Config
	nbrs  []Neighbor // cfg.Neighbors with defaults
	log   *slog.Logger
	start time.Time

	// mu guards all following, and serialises calls into srv.
	mu      sync.Mutex
	srv     *server.BgpServer
	cancel  context.CancelFunc // ends the peer-event watcher
	state   runState
	edges   map[string][]netip.Prefix // edge id → prefixes announced
	owner   map[netip.Prefix]string   // prefix → edge id
	peers   map[netip.Addr]*NeighborStats
	counter struct{ announced, withdrawn, errors uint64 }
}

type runState int

const (
	stateNew runState = iota
	stateRunning
	stateStopped
)

// New checks cfg and returns a speaker that is not yet connected to
// anything. It returns the error of [Config.Validate].
func New(cfg Config) (*Speaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: bgp config:\n%w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Speaker{
		cfg:   cfg,
		log:   log.With("component", "bgp"),
		edges: make(map[string][]netip.Prefix),
		owner: make(map[netip.Prefix]string),
		peers: make(map[netip.Addr]*NeighborStats),
	}
	for _, n := range cfg.Neighbors {
		n = n.withDefaults()
		n.Address = n.Address.Unmap()
		s.nbrs = append(s.nbrs, n)
		s.peers[n.Address] = &NeighborStats{Address: n.Address, AS: n.AS, State: "idle"}
	}
	return s, nil
}

// Start starts the BGP server and begins connecting to every neighbour; it
// returns once they are configured, without waiting for any session to be
// established (see [Speaker.Stats]). ctx bounds the start-up only. It
// returns [ErrStarted] if called twice, [ErrNotStarted] after Stop, or
// GoBGP's error (for example when ListenPort is taken); after an error the
// speaker is stopped.
func (s *Speaker) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateRunning:
		return ErrStarted
	case stateStopped:
		return ErrNotStarted
	}
	srv := server.NewBgpServer(server.LoggerOption(s.log, nil))
	go srv.Serve()
	port := int32(s.cfg.ListenPort)
	if port == 0 {
		port = -1 // GoBGP: do not listen
	}
	err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:        s.cfg.LocalAS,
		RouterId:   s.cfg.RouterID.String(),
		ListenPort: port,
	}})
	if err != nil {
		srv.Stop()
		s.state = stateStopped
		return fmt.Errorf("fleet: start bgp: %w", err)
	}
	// Learn nothing: every route a router sends is rejected on import, so
	// none reaches the node's RIB and none is passed on to another
	// neighbour (a node must never become a transit between routers).
	// (The global import policy also sees the node's own paths, so it
	// rejects by route type, not by default.)
	reject := func(rt api.Conditions_RouteType) *api.Statement {
		return &api.Statement{Name: "reject-" + rt.String(), Conditions: &api.Conditions{RouteType: rt},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}}
	}
	learnNothing := &api.Policy{Name: "bondd-learn-nothing", Statements: []*api.Statement{
		reject(api.Conditions_ROUTE_TYPE_EXTERNAL), reject(api.Conditions_ROUTE_TYPE_INTERNAL)}}
	err = srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: learnNothing})
	if err == nil {
		err = srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
			Policies:      []*api.Policy{{Name: learnNothing.Name}},
			DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
		}})
	}
	if err != nil {
		srv.Stop()
		s.state = stateStopped
		return fmt.Errorf("fleet: start bgp: import policy: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	err = srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onPeerEvent}, server.WatchPeer())
	for _, n := range s.nbrs {
		if err != nil {
			break
		}
		if err = srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(n)}); err != nil {
			err = fmt.Errorf("neighbour %s: %w", n.Address, err)
		}
	}
	if err != nil {
		cancel()
		srv.Stop()
		s.state = stateStopped
		return fmt.Errorf("fleet: start bgp: %w", err)
	}
	s.srv, s.cancel, s.state, s.start = srv, cancel, stateRunning, time.Now()
	s.log.Info("bgp speaker started", "local_as", s.cfg.LocalAS, "router_id", s.cfg.RouterID,
		"listen_port", s.cfg.ListenPort, "neighbors", len(s.nbrs))
	return nil
}

// apiPeer is the GoBGP configuration of one neighbour: IPv4 and IPv6
// unicast, our timers, outbound connections (the speaker also accepts the
// router's own connection when it listens).
func apiPeer(n Neighbor) *api.Peer {
	fam := func(afi api.Family_Afi) *api.AfiSafi {
		return &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}
	}
	hold := uint64(n.HoldTime / time.Second)
	return &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: n.Address.String(),
			PeerAsn:         n.AS,
			AuthPassword:    n.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:               hold,
			KeepaliveInterval:      max(hold/3, 1),
			ConnectRetry:           uint64(n.ConnectRetry / time.Second),
			IdleHoldTimeAfterReset: uint64(n.ConnectRetry / time.Second),
		}},
		Transport: &api.Transport{RemotePort: uint32(n.Port)},
		AfiSafis:  []*api.AfiSafi{fam(api.Family_AFI_IP), fam(api.Family_AFI_IP6)},
	}
}

// Announce makes the routers send traffic for prefixes to this node on
// behalf of edgeID: one route per prefix, next hop [Config.NextHop4] or
// [Config.NextHop6] by family, ORIGIN IGP. It replaces what edgeID
// announced before (prefixes no longer listed are withdrawn), so calling it
// again with the same list changes nothing. An empty list is [Speaker.Withdraw].
//
// Errors, with nothing changed: [ErrNotStarted]; an empty edgeID; a prefix
// that is invalid or has host bits set; [ErrNoNextHop]; [ErrPrefixOwned]
// when another edge announces one of the prefixes. An error from GoBGP is
// returned wrapped and counted in [Stats].Errors.
func (s *Speaker) Announce(edgeID string, prefixes []netip.Prefix) error {
	if edgeID == "" {
		return errors.New("fleet: announce: empty edge id")
	}
	want := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		switch {
		case !p.IsValid():
			return fmt.Errorf("fleet: announce %s: invalid prefix %v", edgeID, p)
		case p.Addr().Is4In6():
			return fmt.Errorf("fleet: announce %s: %s is IPv4-mapped; give it as an IPv4 prefix", edgeID, p)
		case p.Addr().Zone() != "":
			return fmt.Errorf("fleet: announce %s: %s has a zone", edgeID, p)
		case p != p.Masked():
			return fmt.Errorf("fleet: announce %s: prefix %s has host bits set (want %s)", edgeID, p, p.Masked())
		case p.Addr().Is4() && !s.cfg.NextHop4.IsValid(), p.Addr().Is6() && !s.cfg.NextHop6.IsValid():
			return fmt.Errorf("fleet: announce %s: %s: %w", edgeID, p, ErrNoNextHop)
		}
		if !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning {
		return ErrNotStarted
	}
	for _, p := range want {
		if o, ok := s.owner[p]; ok && o != edgeID {
			return fmt.Errorf("fleet: announce %s: %s: %w (%s)", edgeID, p, ErrPrefixOwned, o)
		}
	}
	old := s.edges[edgeID]
	var add, del []netip.Prefix
	for _, p := range want {
		if !slices.Contains(old, p) {
			add = append(add, p)
		}
	}
	for _, p := range old {
		if !slices.Contains(want, p) {
			del = append(del, p)
		}
	}
	if err := s.addLocked(add); err != nil {
		return fmt.Errorf("fleet: announce %s: %w", edgeID, err)
	}
	if err := s.deleteLocked(del); err != nil {
		return fmt.Errorf("fleet: announce %s: %w", edgeID, err)
	}
	for _, p := range add {
		s.owner[p] = edgeID
	}
	if len(want) == 0 {
		delete(s.edges, edgeID)
	} else {
		s.edges[edgeID] = want
	}
	if len(add)+len(del) > 0 {
		s.log.Info("bgp announce", "edge", edgeID, "prefixes", want, "added", len(add), "withdrawn", len(del))
	}
	return nil
}

// Withdraw withdraws every prefix edgeID announced; an edge that announces
// nothing is not an error. It returns [ErrNotStarted], or GoBGP's error
// wrapped (counted in [Stats].Errors; the prefixes stay announced).
func (s *Speaker) Withdraw(edgeID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning {
		return ErrNotStarted
	}
	return s.withdrawLocked(edgeID)
}

func (s *Speaker) withdrawLocked(edgeID string) error {
	old := s.edges[edgeID]
	if len(old) == 0 {
		return nil
	}
	if err := s.deleteLocked(old); err != nil {
		return fmt.Errorf("fleet: withdraw %s: %w", edgeID, err)
	}
	delete(s.edges, edgeID)
	s.log.Info("bgp withdraw", "edge", edgeID, "prefixes", old)
	return nil
}

// WithdrawAll withdraws every edge's prefixes, as a node about to stop
// does. It returns [ErrNotStarted] or the errors of the edges it could not
// withdraw, joined.
func (s *Speaker) WithdrawAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning {
		return ErrNotStarted
	}
	return s.withdrawAllLocked()
}

func (s *Speaker) withdrawAllLocked() error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(s.edges)) {
		errs = append(errs, s.withdrawLocked(id))
	}
	return errors.Join(errs...)
}

// StopFlush is how long [Speaker.Stop] waits after withdrawing everything
// for the UPDATE messages to leave before it closes the sessions.
const StopFlush = 500 * time.Millisecond

// Stop ends the speaker. With graceful set it first withdraws every prefix
// and waits until the withdrawals have been sent (up to [StopFlush] or
// ctx's end); the routers then move the edges' traffic at once rather than
// when the sessions close. Either way it then closes every session with a
// NOTIFICATION (Cease, RFC 4486), which also makes the routers drop what is
// left. Stop on a speaker that is not running does nothing. It returns the
// withdrawal's error, if any; the speaker is stopped regardless.
func (s *Speaker) Stop(ctx context.Context, graceful bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning {
		s.state = stateStopped
		return nil
	}
	var err error
	if graceful {
		err = s.withdrawAllLocked()
		s.flushLocked(ctx)
	}
	s.cancel()
	s.srv.Stop()
	s.state = stateStopped
	for _, p := range s.peers {
		p.setState("idle", time.Now())
	}
	s.log.Info("bgp speaker stopped", "graceful", graceful)
	return err
}

// flushLocked waits until no established neighbour has UPDATEs queued for
// it (GoBGP's per-peer out queue), until StopFlush has passed or ctx ends.
func (s *Speaker) flushLocked(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, StopFlush)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		queued := false
		_ = s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			if st := p.GetState(); st.GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED && st.GetOutQ() > 0 {
				queued = true
			}
		})
		if !queued {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pathsLocked builds the BGP paths of ps; a prefix it cannot express
// counts as an error.
func (s *Speaker) pathsLocked(ps []netip.Prefix) ([]*apiutil.Path, error) {
	paths := make([]*apiutil.Path, 0, len(ps))
	for _, p := range ps {
		path, err := s.path(p)
		if err != nil {
			s.counter.errors++
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func (s *Speaker) addLocked(ps []netip.Prefix) error {
	if len(ps) == 0 {
		return nil
	}
	paths, err := s.pathsLocked(ps)
	if err != nil {
		return err
	}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
		s.counter.errors++
		s.log.Error("bgp add path failed", "prefixes", ps, "err", err)
		return err
	}
	s.counter.announced += uint64(len(ps))
	return nil
}

func (s *Speaker) deleteLocked(ps []netip.Prefix) error {
	if len(ps) == 0 {
		return nil
	}
	paths, err := s.pathsLocked(ps)
	if err != nil {
		return err
	}
	if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: paths}); err != nil {
		s.counter.errors++
		s.log.Error("bgp delete path failed", "prefixes", ps, "err", err)
		return err
	}
	for _, p := range ps {
		delete(s.owner, p)
	}
	s.counter.withdrawn += uint64(len(ps))
	return nil
}

// path is the route this node originates for p.
func (s *Speaker) path(p netip.Prefix) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if p.Addr().Is4() {
		nh, err := bgp.NewPathAttributeNextHop(s.cfg.NextHop4)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: append(attrs, nh)}, nil
	}
	mp, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, s.cfg.NextHop6)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &apiutil.Path{Family: bgp.RF_IPv6_UC, Nlri: nlri, Attrs: append(attrs, mp)}, nil
}

// ribPaths counts the paths in the node's global RIB, both families: with
// the import policy, only the node's own. For tests.
func (s *Speaker) ribPaths() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning {
		return 0, ErrNotStarted
	}
	n := 0
	for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f},
			func(_ bgp.NLRI, paths []*apiutil.Path) { n += len(paths) })
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
