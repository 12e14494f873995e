package tunnel

import (
	"time"

	"github.com/bondd/bondd/policy"
)

// BondStats is a snapshot of one bond. Counters are totals since the bond
// was created, in packets unless named otherwise.
type BondStats struct {
	EdgeID string        `json:"edge_id"`
	BondID uint64        `json:"bond_id"`
	Uptime time.Duration `json:"uptime_ns"` // since creation or the edge's last restart
	MTU    int           `json:"mtu"`       // inner MTU, bytes: the send MTU now (pmtu.go), at most MTUConfigured
	// MTUConfigured is the bond's configured inner MTU, bytes; MTUReason
	// says why MTU is below it (no path carries full-size datagrams),
	// empty when it is not; MTUChanges counts the changes of MTU.
	MTUConfigured int        `json:"mtu_configured"`
	MTUReason     string     `json:"mtu_reason,omitempty"`
	MTUChanges    uint64     `json:"mtu_changes,omitempty"`
	TxPackets     uint64     `json:"tx_packets"`
	RxPackets     uint64     `json:"rx_packets"` // delivered to the TUN
	ICMPSent      uint64     `json:"icmp_sent"`  // "fragmentation needed" / "packet too big" replies
	MSSClamped    uint64     `json:"mss_clamped"`
	Drops         DropCounts `json:"drops"` // every reason of BondDropReasons
	FEC           *FECStats  `json:"fec"`
	Rules         *RuleStats `json:"rules,omitempty"` // rule hits on the send path
	// FlowTagged counts the packets sent with a flow tag (for the peer
	// to resequence); FlowUntagged those that needed one but found no
	// slot in the flow table (the peer delivers them as they arrive).
	FlowTagged   uint64 `json:"flow_tagged"`
	FlowUntagged uint64 `json:"flow_untagged"`
	// Reseq counts what the resequencer did with the tagged packets
	// received (reseq.go).
	Reseq *ReseqStats `json:"reseq"`
	Paths []PathStats `json:"paths"`
	// Control counts the control-plane messages (MoMQ A.2); nil on an
	// edge that has exchanged none.
	Control *ControlStats `json:"control,omitempty"`
	// PeerPaths is the edge's latest PATH_STATE_REPORT, on the
	// concentrator; nil before the first of the edge's session.
	PeerPaths *PeerReport `json:"peer_paths,omitempty"`
	// LabelTxBytes counts the datagram bytes sent (bondd header and inner
	// packet, parity included) per path label "key=value", summed over
	// the paths that carry the label: what each cost_class (or link_type,
	// carrier, …) has carried since the bond was created.
	LabelTxBytes map[string]uint64 `json:"label_tx_bytes,omitempty"`
}

// PathStats is a snapshot of one path.
type PathStats struct {
	Name             string            `json:"name"`
	Labels           map[string]string `json:"labels,omitempty"`
	Status           string            `json:"status"` // ACTIVE, DEGRADED or UNAVAILABLE
	SmoothedRTT      time.Duration     `json:"srtt_ns"`
	MinRTT           time.Duration     `json:"min_rtt_ns"`
	CongestionWindow int               `json:"cwnd_bytes"`
	BytesInFlight    int               `json:"bytes_in_flight"`
	PacketsSent      uint64            `json:"packets_sent"` // QUIC packets sent
	PacketsLost      uint64            `json:"packets_lost"` // QUIC packets declared lost (RFC 9002)
	QueueLen         int               `json:"queue_len"`
	TxPackets        uint64            `json:"tx_packets"`
	TxBytes          uint64            `json:"tx_bytes"`
	RxPackets        uint64            `json:"rx_packets"`
	RxBytes          uint64            `json:"rx_bytes"`
	Drops            DropCounts        `json:"drops"`   // every reason of PathDropReasons
	Rescued          uint64            `json:"rescued"` // queued frames moved to other paths: when this one failed, or when they had waited half their time while it slowed (path.moveAged)
	// Resent counts data datagrams this path lost that were queued again
	// (on this path while it is ACTIVE, else on another); ResendLate
	// those lost too late to arrive before they expired, and dropped.
	Resent     uint64 `json:"resent"`
	ResendLate uint64 `json:"resend_late"`
	// ObjectsDropped counts the video frames (objects the classifier gave
	// a frame ID) of which the send queue dropped at least one packet
	// (full, expired, past a deadline, or the rest of a broken frame),
	// each once: an upper bound of the frames bondd's own queue cost, as
	// FEC may rebuild the packet and a copy on another path may arrive.
	ObjectsDropped uint64 `json:"objects_dropped"`
	// CapacityBps is what the path's congestion window carries per
	// smoothed RTT (cwnd/srtt), bit/s: the capacity the
	// scheduler sees; 0 before the first RTT sample.
	CapacityBps uint64 `json:"capacity_bps"`
	// Conn is the path's live QUIC connection's own counters (quic-go
	// ConnectionStats); nil while the path is down.
	Conn *ConnStats `json:"conn,omitempty"`
	// LastError is why the path's last connection ended (both ends: the
	// peer's close, QUIC's idle timeout, a silent peer) or, on the edge,
	// why its last dial failed; "" while a connection of the path is up.
	LastError string `json:"last_error,omitempty"`
	// Rate is the path's rate control (ratectl.go); nil before the first
	// report from the peer and without the peer's "rate" capability.
	Rate *RateStats `json:"rate,omitempty"`
	// StatusReason says why Status is not ACTIVE: "down", "silent" (the
	// peer has been quiet too long), "loss" (rate control: the receiver
	// sees policy.LossDegraded or more lost) or "budget" (BudgetUsedBytes reached
	// 90 % of BudgetBytes); empty when ACTIVE.
	StatusReason string `json:"status_reason,omitempty"`
	// BudgetBytes is the path's byte budget per BudgetPeriod (config
	// budget, like 2GB/month), 0 without one; BudgetUsedBytes the bytes
	// counted against it in the current UTC day, week or month.
	BudgetBytes     int64  `json:"budget_bytes,omitempty"`
	BudgetUsedBytes int64  `json:"budget_used_bytes,omitempty"`
	BudgetPeriod    string `json:"budget_period,omitempty"`
	// PeerAddr is the peer's UDP address on the path's live connection, as
	// the QUIC connection sees it now (on the concentrator: the edge's
	// uplink address after any NAT); empty while the path is down.
	PeerAddr string `json:"peer_addr,omitempty"`
	// Migrations counts the changes of a live connection's peer address
	// (QUIC connection migration, RFC 9000 §9, or NAT rebinding).
	Migrations uint64 `json:"migrations,omitempty"`
	// SuspectEvents counts the times the path turned SUSPECT (the peer
	// left a send unanswered for max(3·srtt, 100 ms), liveness.go);
	// Probes the liveness probes sent while it was; Keepalives the
	// keepalives the edge sent on the path (liveness.go, idle.go).
	SuspectEvents uint64 `json:"suspect_events,omitempty"`
	Probes        uint64 `json:"probes,omitempty"`
	Keepalives    uint64 `json:"keepalives,omitempty"`
	// DatagramBudget is the largest datagram, bytes, the scheduler puts on
	// the path now: the bond's largest datagram (MTU + HeaderBudget)
	// unless path MTU discovery found the path carries less (pmtu.go,
	// RFC 8899). PMTUState is the discovery's RFC 8899 §5.2 state
	// (SEARCH_COMPLETE, BASE, SEARCH or ERROR); PMTUReason why the budget
	// last changed, empty before any change. BlackHoles counts the black
	// holes detected (large datagrams lost while smaller ones arrive);
	// PMTUProbes the probes sent; PMTUHeld the datagrams that waited
	// parked for a probe's answer while the budget was cut on a mere
	// suspicion and no other path carried them.
	DatagramBudget int    `json:"datagram_budget_bytes"`
	PMTUState      string `json:"pmtu_state"`
	PMTUReason     string `json:"pmtu_reason,omitempty"`
	BlackHoles     uint64 `json:"black_holes,omitempty"`
	PMTUProbes     uint64 `json:"pmtu_probes,omitempty"`
	PMTUHeld       uint64 `json:"pmtu_held,omitempty"`
}

// ConnStats are one QUIC connection's counters, from quic-go's
// ConnectionStats: since the connection was established, in bytes and QUIC
// packets (not bondd datagrams).
type ConnStats struct {
	LatestRTT     time.Duration `json:"latest_rtt_ns"`
	MeanDeviation time.Duration `json:"rtt_mean_deviation_ns"`
	BytesSent     uint64        `json:"bytes_sent"`
	PacketsSent   uint64        `json:"packets_sent"`
	BytesLost     uint64        `json:"bytes_lost"`
	PacketsLost   uint64        `json:"packets_lost"`
	BytesReceived uint64        `json:"bytes_received"`
}

// addPolicyStats fills the fields of s that come from the paths' policy
// state: the status reason, the byte budgets and the per-label byte counts.
func (s *BondStats) addPolicyStats(states []*policy.Path, now time.Time) {
	for _, st := range states {
		for i := range s.Paths {
			ps := &s.Paths[i]
			if ps.Name != st.Name {
				continue
			}
			status, why := st.StatusAndReason(now) // one read: the pair agrees
			ps.Status, ps.StatusReason = status.String(), why
			if b := st.Budget(); !b.IsZero() {
				ps.BudgetUsedBytes, ps.BudgetBytes = st.BudgetUsed(now)
				ps.BudgetPeriod = b.Period.String()
			}
		}
		if n := st.BytesSent(); n > 0 {
			for k, v := range st.CurrentLabels() {
				if s.LabelTxBytes == nil {
					s.LabelTxBytes = make(map[string]uint64)
				}
				s.LabelTxBytes[k+"="+v] += n
			}
		}
	}
}
