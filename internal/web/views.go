package web

import (
	"cmp"
	"slices"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/tunnel"
)

// edgeMsg is the edge view: one bond, its paths, rules and events.
type edgeMsg struct {
	common
	Edge   string            `json:"edge"`
	Edges  int               `json:"edges"` // bonds in the report
	Error  string            `json:"error,omitempty"`
	Bond   *bondNow          `json:"bond,omitempty"`
	Paths  []pathMsg         `json:"paths"`
	Rules  *rulesMsg         `json:"rules,omitempty"`
	Fleet  *status.EdgeNodes `json:"fleet,omitempty"`
	Events []Event           `json:"events"`
	Hist   *histMsg          `json:"hist,omitempty"`
}

// pathMsg is a path's current values, its full status entry (raw),
// which carries every field of tunnel.PathStats, and its entry of the
// report's usage (a usage.PathUsage: period, budget use and projection),
// absent when the daemon keeps no usage.
type pathMsg struct {
	pathNow
	Raw   tunnel.PathStats `json:"raw"`
	Usage any              `json:"usage,omitempty"`
}

// rulesMsg is the rule set in force and each rule's packets.
type rulesMsg struct {
	*status.Rules
	Hits []ruleHits `json:"hits"`
}

// ruleHits is one rule's matched packets and their bytes: in total for
// the set in force, and over the last minute.
type ruleHits struct {
	ID           string `json:"id"`
	Total        uint64 `json:"total"`
	LastMin      uint64 `json:"last_min"`
	Bytes        uint64 `json:"bytes"`
	BytesLastMin uint64 `json:"bytes_last_min"`
}

// histMsg is the history sent with an edge view's first message: for
// each path and the bond, oldest first, one value a second up to the
// current sample; -1 is no value.
type histMsg struct {
	Len   int                   `json:"len"`
	Paths map[string]pathSeries `json:"paths"`
	Bond  bondSeries            `json:"bond"`
}

type pathSeries struct {
	Allowed   []float32 `json:"allowed_bps"`
	Sent      []float32 `json:"sent_bps"`
	Delivered []float32 `json:"delivered_bps"`
	RTT       []float32 `json:"rtt_ms"`
	Queue     []float32 `json:"queue_delay_ms"`
	Loss      []float32 `json:"link_loss"`
}

type bondSeries struct {
	Delivered []float32 `json:"delivered_bps"`
	Sum       []float32 `json:"sum_rate_bps"`
}

// maxEdgeEvents is the events an edge view carries.
const maxEdgeEvents = 50

func (h *hub) edgeView(f *frame, q query, withHist bool) *edgeMsg {
	m := &edgeMsg{common: h.common(f, "edge"), Edge: q.edge, Edges: len(h.order), Fleet: h.rep.Fleet, Paths: []pathMsg{}, Events: []Event{}}
	if m.Edge == "" && len(h.order) > 0 {
		m.Edge = h.order[0]
	}
	bs := h.bonds[m.Edge]
	if bs == nil {
		m.Error = "no bond of edge " + m.Edge
		if m.Edge == "" {
			m.Error = "no bond yet"
		}
		return m
	}
	bn := bs.now
	bn.Drops = drops(&bs.raw)
	m.Bond = &bn
	for _, p := range bs.paths {
		pm := pathMsg{pathNow: p.now, Raw: p.raw}
		if u := h.rep.Usage; u != nil {
			for _, pu := range u.Paths {
				if pu.Bond == m.Edge && pu.Path == p.now.Name {
					pm.Usage = pu
				}
			}
		}
		m.Paths = append(m.Paths, pm)
	}
	if h.rep.Rules != nil || bs.raw.Rules != nil {
		m.Rules = &rulesMsg{Rules: h.rep.Rules, Hits: bs.ruleHits()}
	}
	for i := len(h.events) - 1; i >= 0 && len(m.Events) < maxEdgeEvents; i-- {
		if e := h.events[i]; e.Edge == "" || e.Edge == m.Edge {
			m.Events = append(m.Events, e)
		}
	}
	if withHist && bs.full != nil {
		m.Hist = bs.history(h.tick)
	}
	return m
}

// ruleHits is each rule's total and last-minute hits; a total below the
// one a minute ago (the set was replaced) counts from zero.
func (bs *bondState) ruleHits() []ruleHits {
	out := []ruleHits{}
	if bs.raw.Rules == nil {
		return out
	}
	old := bs.rules[rulesWindow]
	for i := rulesWindow; old == nil && i > 0; i-- {
		old = bs.rules[i-1]
	}
	for _, r := range bs.raw.Rules.Rules {
		rh := ruleHits{ID: r.ID, Total: r.Hits, LastMin: r.Hits, Bytes: r.Bytes, BytesLastMin: r.Bytes}
		if o, ok := old[r.ID]; ok && o[0] <= r.Hits && o[1] <= r.Bytes {
			rh.LastMin, rh.BytesLastMin = r.Hits-o[0], r.Bytes-o[1]
		}
		out = append(out, rh)
	}
	return out
}

// history returns the bond's recorded samples, oldest first.
func (bs *bondState) history(tick uint64) *histMsg {
	n := int(min(tick-bs.full.since+1, histLen))
	series := func(ring *[histLen]float32) []float32 {
		out := make([]float32, n)
		for i := range n {
			out[i] = ring[(tick-uint64(n-1-i))%histLen]
		}
		return out
	}
	m := &histMsg{Len: n, Paths: make(map[string]pathSeries, len(bs.paths))}
	m.Bond = bondSeries{Delivered: series(&bs.full.delivered), Sum: series(&bs.full.sum)}
	for _, p := range bs.paths {
		f := p.full
		if f == nil {
			continue
		}
		k := int(min(tick-f.since+1, histLen))
		s := pathSeries{Allowed: series(&f.allowed), Sent: series(&f.sent), Delivered: series(&f.delivered), RTT: series(&f.rtt), Queue: series(&f.queue), Loss: series(&f.loss)}
		for _, sl := range [][]float32{s.Allowed, s.Sent, s.Delivered, s.RTT, s.Queue, s.Loss} {
			for i := 0; i < n-k; i++ { // before the path was known
				sl[i] = -1
			}
		}
		m.Paths[p.now.Name] = s
	}
	return m
}

// fleetMsg is the concentrator's table: one page of its edges.
type fleetMsg struct {
	common
	Total          int               `json:"total"`   // bonds
	Up             int               `json:"up"`      // bonds with a path up
	Matched        int               `json:"matched"` // bonds passing the filter
	Page           int               `json:"page"`
	Size           int               `json:"size"`
	Sort           string            `json:"sort"`
	Desc           bool              `json:"desc"`
	Filter         string            `json:"q"`
	Rows           []rowMsg          `json:"rows"`
	BGP            *status.BGP       `json:"bgp,omitempty"`
	NoRoute        uint64            `json:"no_route"`
	AuthFailures   uint64            `json:"auth_failures"`
	TransportDrops map[string]uint64 `json:"transport_drops,omitempty"`
	Events         []Event           `json:"events"`
}

// rowMsg is one edge of the table.
type rowMsg struct {
	Edge      string      `json:"edge"`
	Up        bool        `json:"up"`
	Paths     []sparkPath `json:"paths"`
	UptimeS   float64     `json:"uptime_s"`
	Addresses []string    `json:"addresses,omitempty"`
	InBps     float64     `json:"in_bps"`
	OutBps    float64     `json:"out_bps"`
	E2ELoss   float64     `json:"e2e_loss"`
	LinkLoss  float64     `json:"link_loss"`
}

// sparkPath is a path of a table row with its last minute of delivered
// (or received) rate, bit/s, oldest first; -1 is no value.
type sparkPath struct {
	Name   string    `json:"name"`
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Spark  []float32 `json:"spark"`
}

// maxFleetEvents is the events a fleet view carries.
const maxFleetEvents = 30

func (h *hub) fleetView(f *frame, q query) *fleetMsg {
	m := &fleetMsg{common: h.common(f, "fleet"), Total: len(h.order), Page: q.page, Size: q.size, Sort: q.sort, Desc: q.desc, Filter: q.q,
		Rows: []rowMsg{}, BGP: h.rep.BGP, NoRoute: h.rep.NoRoute, AuthFailures: h.rep.AuthFailures, TransportDrops: h.rep.TransportDrops, Events: []Event{}}
	var list []*bondState
	for _, id := range h.order {
		bs := h.bonds[id]
		if bs.now.Up {
			m.Up++
		}
		if matches(id, q.q) {
			list = append(list, bs)
		}
	}
	m.Matched = len(list)
	slices.SortStableFunc(list, func(a, b *bondState) int {
		var c int
		switch q.sort {
		case "loss":
			c = cmp.Compare(a.now.E2ELoss, b.now.E2ELoss)
		case "linkloss":
			c = cmp.Compare(a.now.LinkLoss, b.now.LinkLoss)
		case "rate":
			c = cmp.Compare(a.now.InBps+a.now.OutBps, b.now.InBps+b.now.OutBps)
		case "paths":
			c = cmp.Compare(a.now.Paths, b.now.Paths)
		}
		if q.desc {
			c = -c
		}
		if c == 0 {
			c = cmp.Compare(a.now.Edge, b.now.Edge)
		}
		return c
	})
	lo := min(q.page*q.size, len(list))
	for _, bs := range list[lo:min(lo+q.size, len(list))] {
		r := rowMsg{Edge: bs.now.Edge, Up: bs.now.Up, UptimeS: bs.now.UptimeS, Addresses: bs.now.Addresses, InBps: bs.now.InBps, OutBps: bs.now.OutBps,
			E2ELoss: bs.now.E2ELoss, LinkLoss: bs.now.LinkLoss, Paths: []sparkPath{}}
		for _, p := range bs.paths {
			sp := sparkPath{Name: p.now.Name, State: p.now.State, Reason: p.now.Reason, Spark: make([]float32, sparkLen)}
			for i := range sparkLen {
				sp.Spark[i] = p.spark[(h.tick+1+uint64(i))%sparkLen]
			}
			r.Paths = append(r.Paths, sp)
		}
		m.Rows = append(m.Rows, r)
	}
	for i := len(h.events) - 1; i >= 0 && len(m.Events) < maxFleetEvents; i-- {
		m.Events = append(m.Events, h.events[i])
	}
	return m
}

// drops sums a bond's and its paths' drops by reason name.
func drops(b *status.Bond) map[string]uint64 {
	m := make(map[string]uint64, len(tunnel.BondDropReasons)+len(tunnel.PathDropReasons))
	for _, r := range tunnel.BondDropReasons {
		m[r.String()] += b.Drops[r]
	}
	for i := range b.Paths {
		for _, r := range tunnel.PathDropReasons {
			m[r.String()] += b.Paths[i].Drops[r]
		}
	}
	return m
}
