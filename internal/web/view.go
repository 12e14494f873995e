package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/tunnel"
)

// Event is one entry of the page's event list, derived by comparing
// successive status reports: a path's state or path MTU, the bond's MTU,
// a bond appearing or going down, a rule reload (with the error of a
// rejected file), a fleet move, a BGP session's state.
type Event struct {
	TimeMs int64  `json:"t"`              // Unix milliseconds
	Edge   string `json:"edge,omitempty"` // empty: the node's own
	Path   string `json:"path,omitempty"`
	Kind   string `json:"kind"` // state, mtu, bond, rules, fleet, bgp
	Text   string `json:"text"`
}

// pathNow is a path's current values, from the report and its difference
// with the previous one (rates over the last sample, bit/s).
type pathNow struct {
	Name   string `json:"name"`
	State  string `json:"state"`            // ACTIVE, DEGRADED, SUSPECT or DOWN
	Reason string `json:"reason,omitempty"` // status_reason: suspect, silent, loss, budget, down
	// AllowedBps is the rate bondd allows the path: the rate controller's
	// target when it paces, else what the congestion window carries per
	// RTT (capacity_bps).
	AllowedBps float64 `json:"allowed_bps"`
	// SentBps is the bytes handed to the path; DeliveredBps what the peer
	// reports it received (rate control's delivery rate), or SentBps
	// without reports; InBps what arrived on the path.
	SentBps      float64 `json:"sent_bps"`
	DeliveredBps float64 `json:"delivered_bps"`
	InBps        float64 `json:"in_bps"`
	RTTms        float64 `json:"rtt_ms"`
	MinRTTms     float64 `json:"min_rtt_ms"`
	// QueueDelayMs is the one-way queueing delay the peer measures (above
	// the path's lowest one-way delay), -1 without rate reports.
	QueueDelayMs float64 `json:"queue_delay_ms"`
	// LinkLoss is QUIC's lost/sent over the last sample, or PeerLoss when
	// fewer than minLossSample packets were sent (a receiving end sends
	// little but acknowledgements), -1 when nothing was sent; PeerLoss is
	// the loss the receiver saw over about a second (-1 without reports).
	LinkLoss float64 `json:"link_loss"`
	PeerLoss float64 `json:"peer_loss"`
	// PMTU is the largest datagram the path carries now, bytes.
	PMTU      int    `json:"pmtu"`
	PMTUState string `json:"pmtu_state,omitempty"`
	// Budget: bytes allowed per period and used so far, 0 without one.
	BudgetBytes     int64             `json:"budget_bytes,omitempty"`
	BudgetUsedBytes int64             `json:"budget_used_bytes,omitempty"`
	BudgetPeriod    string            `json:"budget_period,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// bondNow is a bond's current values.
type bondNow struct {
	Edge          string   `json:"edge"`
	BondID        uint64   `json:"bond_id"`
	Up            bool     `json:"up"`    // some path is not DOWN
	Paths         int      `json:"paths"` // paths up
	UptimeS       float64  `json:"uptime_s"`
	Addresses     []string `json:"addresses,omitempty"`
	MTU           int      `json:"mtu"`
	MTUConfigured int      `json:"mtu_configured"`
	MTUReason     string   `json:"mtu_reason,omitempty"`
	// DeliveredBps and SumRateBps sum the paths' delivered and allowed
	// rates (allowed over the paths up); InBps and OutBps their received
	// and sent rates.
	DeliveredBps float64 `json:"delivered_bps"`
	SumRateBps   float64 `json:"sum_rate_bps"`
	InBps        float64 `json:"in_bps"`
	OutBps       float64 `json:"out_bps"`
	// E2ELoss is the share of the packets this end should have received
	// over the last sample that FEC could not rebuild (fec lost over
	// delivered + lost), -1 when none were due; LinkLoss the worst
	// path's LinkLoss (-1: none).
	E2ELoss  float64 `json:"e2e_loss"`
	LinkLoss float64 `json:"link_loss"`
	// FEC is the bond's FEC counters and their rates over the last sample.
	FEC *fecNow `json:"fec,omitempty"`
	// Reseq is the resequencer's counters; nil without one.
	Reseq     *tunnel.ReseqStats `json:"reseq,omitempty"`
	TxPackets uint64             `json:"tx_packets"`
	RxPackets uint64             `json:"rx_packets"`
	// Drops are the bond's and its paths' drops by reason (the names of
	// tunnel.DropReason), totals.
	Drops map[string]uint64 `json:"drops,omitempty"`
	// FramesHit is the video frames the send queues dropped a packet of
	// (the paths' objects_dropped summed).
	FramesHit uint64 `json:"frames_hit"`
}

// fecNow is the bond's FEC.
type fecNow struct {
	Mode          string  `json:"mode"`
	CodingRate    float64 `json:"coding_rate"`
	ParitySent    uint64  `json:"parity_sent"`
	Recovered     uint64  `json:"recovered"`
	Lost          uint64  `json:"lost"`
	ParityPerS    float64 `json:"parity_per_s"`
	RecoveredPerS float64 `json:"recovered_per_s"`
}

// minLossSample is the fewest QUIC packets sent in a sample for their
// loss ratio to stand as the path's link loss.
const minLossSample = 100

// stateText is the card's state: DOWN for UNAVAILABLE, SUSPECT for a
// path DEGRADED because the peer left a send unanswered.
func stateText(p pathNow) string { return p.State }

func itoa(n int) string { return strconv.Itoa(n) }

// rate is bytes per second over dt seconds as bit/s; 0 when dt is 0 or
// the counter went back (a restart).
func rate(cur, prev uint64, dt float64) float64 {
	if dt <= 0 || cur < prev {
		return 0
	}
	return 8 * float64(cur-prev) / dt
}

// computePath derives a path's current values from p and its previous
// sample pp (nil for the first), dt seconds apart.
func computePath(p, pp *tunnel.PathStats, dt float64, role string) pathNow {
	n := pathNow{Name: p.Name, State: p.Status, Reason: p.StatusReason, RTTms: p.SmoothedRTT.Seconds() * 1e3, MinRTTms: p.MinRTT.Seconds() * 1e3,
		QueueDelayMs: -1, LinkLoss: -1, PeerLoss: -1, PMTU: p.DatagramBudget, PMTUState: p.PMTUState,
		BudgetBytes: p.BudgetBytes, BudgetUsedBytes: p.BudgetUsedBytes, BudgetPeriod: p.BudgetPeriod, Labels: p.Labels,
		AllowedBps: float64(p.CapacityBps)}
	switch {
	case p.Status == "UNAVAILABLE":
		n.State = "DOWN"
	case p.Status == "DEGRADED" && p.StatusReason == "suspect":
		n.State = "SUSPECT"
	}
	if r := p.Rate; r != nil {
		if r.Active && r.TargetBps > 0 {
			n.AllowedBps = float64(r.TargetBps)
		}
		n.QueueDelayMs, n.PeerLoss = r.QueueDelay.Seconds()*1e3, r.Loss
	}
	if pp != nil {
		n.SentBps, n.InBps = rate(p.TxBytes, pp.TxBytes, dt), rate(p.RxBytes, pp.RxBytes, dt)
		if s := p.PacketsSent - pp.PacketsSent; p.PacketsSent > pp.PacketsSent && p.PacketsLost >= pp.PacketsLost {
			n.LinkLoss = float64(p.PacketsLost-pp.PacketsLost) / float64(s)
			if s < minLossSample && n.PeerLoss >= 0 {
				n.LinkLoss = n.PeerLoss
			}
		}
	}
	// The peer's delivery rate while its reports arrive; a path whose
	// reports stopped (suspect, silent) delivers nothing known.
	n.DeliveredBps = n.SentBps
	if r := p.Rate; r != nil && pp != nil && pp.Rate != nil {
		n.DeliveredBps = 0
		if r.Reports > pp.Rate.Reports {
			n.DeliveredBps = float64(r.DeliveryBps)
		}
	}
	if role == "concentrator" && n.DeliveredBps == 0 {
		n.DeliveredBps = n.InBps
	}
	if p.Status == "UNAVAILABLE" {
		n.AllowedBps = 0
	}
	return n
}

// computeBond fills the bond-wide rates of n from b and its previous
// sample (nil for the first), dt seconds apart.
func computeBond(n *bondNow, b, prev *status.Bond, dt float64) {
	n.E2ELoss, n.Reseq = -1, b.Reseq
	if f := b.FEC; f != nil {
		n.FEC = &fecNow{Mode: f.Mode, CodingRate: f.CodingRate, ParitySent: f.ParitySent, Recovered: f.Recovered, Lost: f.Lost}
		if prev != nil && prev.FEC != nil && dt > 0 {
			pf := prev.FEC
			if f.ParitySent >= pf.ParitySent {
				n.FEC.ParityPerS = float64(f.ParitySent-pf.ParitySent) / dt
			}
			if f.Recovered >= pf.Recovered {
				n.FEC.RecoveredPerS = float64(f.Recovered-pf.Recovered) / dt
			}
			if f.Lost >= pf.Lost && b.RxPackets >= prev.RxPackets {
				lost, got := f.Lost-pf.Lost, b.RxPackets-prev.RxPackets
				if lost+got > 0 {
					n.E2ELoss = float64(lost) / float64(lost+got)
				}
			}
		}
	}
}

// query is what a stream asks for.
type query struct {
	view string // edge or fleet; auto: edge with edge set or on an edge, else fleet
	edge string
	sort string // edge, loss, linkloss, rate, paths
	desc bool
	page int
	size int
	q    string // substring of the edge id
}

// Limits of a query.
const (
	defaultPageSize = 50
	maxPageSize     = 200
	maxQueryBytes   = 64
)

// parseQuery reads the stream's query parameters: view (auto, edge,
// fleet), edge, sort (edge, loss, linkloss, rate, paths), desc (0 or 1),
// page (from 0), size (1 to maxPageSize) and q (a filter on edge ids).
func parseQuery(v url.Values) (query, error) {
	q := query{view: v.Get("view"), edge: v.Get("edge"), sort: v.Get("sort"), q: v.Get("q"), size: defaultPageSize}
	if q.view == "" {
		q.view = "auto"
	}
	if q.sort == "" {
		q.sort = "edge"
	}
	if !slices.Contains([]string{"auto", "edge", "fleet"}, q.view) {
		return q, fmt.Errorf("view %q: expected auto, edge or fleet", q.view)
	}
	if !slices.Contains([]string{"edge", "loss", "linkloss", "rate", "paths"}, q.sort) {
		return q, fmt.Errorf("sort %q: expected edge, loss, linkloss, rate or paths", q.sort)
	}
	if len(q.edge) > maxQueryBytes || len(q.q) > maxQueryBytes {
		return q, fmt.Errorf("edge and q are at most %d bytes", maxQueryBytes)
	}
	q.desc = v.Get("desc") == "1"
	for _, f := range []struct {
		name   string
		dst    *int
		lo, hi int
	}{{"page", &q.page, 0, 1 << 20}, {"size", &q.size, 1, maxPageSize}} {
		if s := v.Get(f.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < f.lo || n > f.hi {
				return q, fmt.Errorf("%s %q: expected a number from %d to %d", f.name, s, f.lo, f.hi)
			}
			*f.dst = n
		}
	}
	return q, nil
}

func (q query) key() string {
	return fmt.Sprintf("%s|%s|%s|%v|%d|%d|%s", q.view, q.edge, q.sort, q.desc, q.page, q.size, q.q)
}

// common are the fields of every message.
type common struct {
	Kind       string  `json:"kind"` // edge or fleet
	TimeMs     int64   `json:"t"`
	Tick       uint64  `json:"tick"`
	Role       string  `json:"role"`
	Version    string  `json:"version"`
	UptimeS    float64 `json:"uptime_s"`
	IntervalMs int64   `json:"interval_ms"`
}

// message returns the SSE message of frame f for q: shared between the
// viewers that ask the same, except an edge view's first message, which
// carries the history.
func (h *hub) message(f *frame, q query, first bool) []byte {
	key := q.key()
	h.mu.RLock()
	isEdge := h.wantsEdge(q)
	h.mu.RUnlock()
	withHist := first && isEdge
	if !withHist {
		f.mu.Lock()
		b, ok := f.enc[key]
		f.mu.Unlock()
		if ok {
			return b
		}
	}
	h.mu.RLock()
	var v any
	if isEdge {
		v = h.edgeView(f, q, withHist)
	} else {
		v = h.fleetView(f, q)
	}
	h.mu.RUnlock()
	body, err := json.Marshal(v)
	if err != nil {
		body = []byte(`{"kind":"error","error":` + strconv.Quote(err.Error()) + `}`)
	}
	b := make([]byte, 0, len(body)+8)
	b = append(append(append(b, "data: "...), body...), "\n\n"...)
	if !withHist {
		f.mu.Lock()
		f.enc[key] = b
		f.mu.Unlock()
	}
	if isEdge {
		h.markViewed(q.edge)
	}
	return b
}

// wantsEdge reports whether q is an edge view; h.mu must be held.
func (h *hub) wantsEdge(q query) bool {
	return q.view == "edge" || q.view == "auto" && (q.edge != "" || h.rep.Role != "concentrator")
}

// markViewed records that an edge's page is open, so it keeps full
// history when there are more bonds than maxDetailed.
func (h *hub) markViewed(edge string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bs := h.bonds[edge]; bs != nil {
		bs.viewed = h.tick
	}
}

func (h *hub) common(f *frame, kind string) common {
	return common{Kind: kind, TimeMs: f.t.UnixMilli(), Tick: f.tick, Role: h.rep.Role, Version: h.rep.Version,
		UptimeS: h.rep.Uptime.Seconds(), IntervalMs: h.interval.Milliseconds()}
}

// matches reports whether an edge id passes the filter q (a substring,
// case-insensitive).
func matches(id, q string) bool {
	return q == "" || strings.Contains(strings.ToLower(id), strings.ToLower(q))
}
