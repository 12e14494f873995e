package fleet

import (
	"context"
	"net/netip"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// Stats is a snapshot of the speaker for `bondd status` and the metrics.
type Stats struct {
	// Running is true between a successful Start and Stop.
	Running bool
	// Uptime is the time since Start; 0 when not running.
	Uptime time.Duration
	// Edges is the number of edges with at least one prefix announced.
	Edges int
	// Prefixes is the number of prefixes announced now.
	Prefixes int
	// AnnouncedTotal and WithdrawnTotal count prefixes handed to and
	// withdrawn from BGP since New (a re-announce counts again).
	AnnouncedTotal, WithdrawnTotal uint64
	// Errors counts failed announcements and withdrawals.
	Errors uint64
	// Neighbors has one entry per configured neighbour, in config order.
	Neighbors []NeighborStats
}

// NeighborStats is the state of the session with one neighbour.
type NeighborStats struct {
	// Address and AS are the neighbour's, from the config.
	Address netip.Addr
	AS      uint32
	// State is the BGP FSM state (RFC 4271 §8.2.2) in lower case: idle,
	// connect, active, opensent, openconfirm or established.
	State string
	// Since is when State was entered.
	Since time.Time
	// Established counts the times the session reached established;
	// Drops the times it left it.
	Established, Drops uint64
	// NotificationsSent counts the NOTIFICATION messages (RFC 4271 §4.5)
	// this node sent the neighbour: each is a refusal of something it
	// sent (a malformed message, a wrong AS in its OPEN, a hold timer
	// expiry) or a Cease when the node stops. NotificationsReceived counts
	// those the neighbour sent (it refused this node, or ceased). Both
	// count across sessions since Start.
	NotificationsSent, NotificationsReceived uint64
	// LastError is the reason the last session ended or failed to open,
	// as GoBGP words it (bad-peer-as, invalid-msg, notification-received,
	// hold-timer-expired, ...); "" if none.
	LastError string
}

// Uptime is how long the session has been established; 0 if it is not.
func (n NeighborStats) Uptime(now time.Time) time.Duration {
	if n.State != "established" {
		return 0
	}
	return now.Sub(n.Since)
}

func (n *NeighborStats) setState(st string, at time.Time) {
	if st == n.State {
		return
	}
	if n.State == "established" {
		n.Drops++
	}
	if st == "established" {
		n.Established++
	}
	n.State, n.Since = st, at
}

// Stats returns a snapshot. It asks GoBGP for the message counters (one
// management call, well under a millisecond), so call it at the rate of a
// status request or a metrics scrape, not per packet.
func (s *Speaker) Stats() Stats {
	s.mu.Lock()
	srv, running := s.srv, s.state == stateRunning
	s.mu.Unlock()
	notif := map[netip.Addr][2]uint64{}
	if running {
		// Outside mu: GoBGP's peer-event callback takes mu.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
			if m := p.GetState().GetMessages(); err == nil && m != nil {
				notif[a.Unmap()] = [2]uint64{m.GetSent().GetNotification(), m.GetReceived().GetNotification()}
			}
		})
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, n := range notif {
		if p, ok := s.peers[a]; ok {
			p.NotificationsSent, p.NotificationsReceived = n[0], n[1]
		}
	}
	st := Stats{
		Running:        s.state == stateRunning,
		Edges:          len(s.edges),
		Prefixes:       len(s.owner),
		AnnouncedTotal: s.counter.announced,
		WithdrawnTotal: s.counter.withdrawn,
		Errors:         s.counter.errors,
	}
	if st.Running {
		st.Uptime = time.Since(s.start)
	}
	for _, n := range s.nbrs {
		st.Neighbors = append(st.Neighbors, *s.peers[n.Address])
	}
	return st
}

// onPeerEvent is GoBGP's peer-state callback: it keeps NeighborStats.
func (s *Speaker) onPeerEvent(ev *apiutil.WatchEventMessage_PeerEvent, at time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := ev.Peer.State
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.peers[st.NeighborAddress.Unmap()]
	if !ok {
		return
	}
	state := fsmName(st.SessionState)
	switch st.DisconnectReason {
	case api.PeerState_DISCONNECT_REASON_UNSPECIFIED, api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED,
		api.PeerState_DISCONNECT_REASON_RESTART_TIMER_EXPIRED:
		// no reason, or the FSM's own retry timers: keep the last real one
	default:
		if state == "established" {
			break
		}
		if n.LastError != st.DisconnectMessage || n.State == "established" {
			s.log.Warn("bgp session ended", "neighbor", n.Address, "as", n.AS,
				"reason", st.DisconnectReason.String(), "message", st.DisconnectMessage)
		}
		n.LastError = st.DisconnectMessage
	}
	n.setState(state, at)
}

func fsmName(s bgp.FSMState) string {
	switch s {
	case bgp.BGP_FSM_IDLE:
		return "idle"
	case bgp.BGP_FSM_CONNECT:
		return "connect"
	case bgp.BGP_FSM_ACTIVE:
		return "active"
	case bgp.BGP_FSM_OPENSENT:
		return "opensent"
	case bgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case bgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return "unknown"
}
