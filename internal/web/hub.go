package web

import (
	"context"
	"sync"
	"time"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/tunnel"
)

// History sizes.
const (
	// histLen is the samples of a detailed bond's charts: five minutes at
	// one a second.
	histLen = 300
	// sparkLen is the samples of each path's sparkline in the edge table.
	sparkLen = 60
	// rulesWindow is the window of the rule counts, in samples.
	rulesWindow = 60
	// maxDetailed bounds the bonds with full history: every bond when
	// there are no more, else those whose page was opened most recently.
	maxDetailed = 16
	// maxEvents is the length of the event list kept.
	maxEvents = 200
)

// frame is one published sample: the tick number and when.
type frame struct {
	tick uint64
	t    time.Time
	mu   sync.Mutex
	enc  map[string][]byte // encoded messages by query, shared by viewers
}

// hub samples the status source and keeps the history and events every
// view is built from. Its state is guarded by mu; frames are published
// through next, closed and replaced at each sample.
type hub struct {
	src      func() status.Report
	interval time.Duration

	mu        sync.RWMutex
	rep       status.Report
	tick      uint64
	cur       *frame
	next      chan struct{}
	bonds     map[string]*bondState // by edge id
	order     []string              // edge ids in report order
	events    []Event               // oldest first, at most maxEvents
	prevRules *status.Rules
	prevFleet *status.EdgeNodes
	prevBGP   map[string]string // neighbour address → state
}

// bondState is what the hub keeps of one bond between samples.
type bondState struct {
	raw    status.Bond
	seen   uint64 // last tick in the report
	viewed uint64 // last tick an edge view asked for it
	prevT  time.Time
	prev   *status.Bond // the previous sample
	now    bondNow
	paths  []*pathState
	full   *bondHist                             // nil unless detailed
	rules  [rulesWindow + 1]map[string][2]uint64 // hit and byte totals, newest first
}

// pathState is one path's latest values and history.
type pathState struct {
	now   pathNow
	raw   tunnel.PathStats
	spark [sparkLen]float32 // delivered (edge) or in+out (concentrator), bit/s
	full  *pathHist
}

// pathHist is five minutes of one path, one sample a second; -1 is no
// value.
type pathHist struct {
	since                                      uint64 // first tick recorded
	allowed, sent, delivered, rtt, queue, loss [histLen]float32
}

// bondHist is five minutes of a bond's totals.
type bondHist struct {
	since          uint64
	delivered, sum [histLen]float32
}

func newHub(src func() status.Report, interval time.Duration) *hub {
	return &hub{src: src, interval: interval, cur: &frame{}, next: make(chan struct{}), bonds: make(map[string]*bondState), prevBGP: make(map[string]string)}
}

// routineSample samples every interval until ctx is done.
func (h *hub) routineSample(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.sample(now)
		}
	}
}

// latest returns the current frame and a channel closed at the next.
func (h *hub) latest() (*frame, <-chan struct{}) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.cur, h.next
}

// report returns the last report sampled.
func (h *hub) report() status.Report {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.rep
}

// sample reads the source once, updates every bond and the events, and
// publishes a frame.
func (h *hub) sample(now time.Time) {
	rep := h.src()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tick++
	h.rep = rep
	h.order = h.order[:0]
	for i := range rep.Bonds {
		b := &rep.Bonds[i]
		bs := h.bonds[b.EdgeID]
		if bs == nil {
			bs = &bondState{}
			h.bonds[b.EdgeID] = bs
			if h.tick > 1 {
				h.event(now, b.EdgeID, "", "bond", "bond appeared")
			}
		}
		h.order = append(h.order, b.EdgeID)
		h.updateBond(bs, b, now, rep.Role)
	}
	for id, bs := range h.bonds {
		if bs.seen != h.tick {
			delete(h.bonds, id)
			h.event(now, id, "", "bond", "bond removed")
		}
	}
	h.assignDetail()
	h.reportEvents(&rep, now)
	h.cur = &frame{tick: h.tick, t: now, enc: make(map[string][]byte)}
	close(h.next)
	h.next = make(chan struct{})
}

// assignDetail gives full history to every bond when there are at most
// maxDetailed, else to the maxDetailed viewed most recently (in the last
// five minutes), and drops it from the others.
func (h *hub) assignDetail() {
	all := len(h.bonds) <= maxDetailed
	var keep map[*bondState]bool
	if !all {
		var viewed []*bondState
		for _, bs := range h.bonds {
			if bs.viewed > 0 && h.tick-bs.viewed < histLen {
				viewed = append(viewed, bs)
			}
		}
		// The most recently viewed first; few bonds, so a simple sort.
		for i := 1; i < len(viewed); i++ {
			for j := i; j > 0 && viewed[j].viewed > viewed[j-1].viewed; j-- {
				viewed[j], viewed[j-1] = viewed[j-1], viewed[j]
			}
		}
		keep = make(map[*bondState]bool)
		for i := 0; i < len(viewed) && i < maxDetailed; i++ {
			keep[viewed[i]] = true
		}
	}
	for _, bs := range h.bonds {
		detailed := all || keep[bs]
		switch {
		case detailed && bs.full == nil:
			bs.full = &bondHist{since: h.tick}
			for _, p := range bs.paths {
				p.full = &pathHist{since: h.tick}
			}
			bs.record(h.tick)
		case !detailed && bs.full != nil:
			bs.full = nil
			for _, p := range bs.paths {
				p.full = nil
			}
		}
	}
}

// event appends an event, dropping the oldest past maxEvents.
func (h *hub) event(t time.Time, edge, path, kind, text string) {
	if len(h.events) == maxEvents {
		copy(h.events, h.events[1:])
		h.events = h.events[:maxEvents-1]
	}
	h.events = append(h.events, Event{TimeMs: t.UnixMilli(), Edge: edge, Path: path, Kind: kind, Text: text})
}

// updateBond computes the bond's and its paths' current values from the
// difference with the previous sample, records history and derives the
// bond's events.
func (h *hub) updateBond(bs *bondState, b *status.Bond, now time.Time, role string) {
	bs.seen = h.tick
	dt := now.Sub(bs.prevT).Seconds()
	prev := bs.prev
	if prev == nil || dt <= 0 {
		dt = 0
	}
	paths := make([]*pathState, 0, len(b.Paths))
	n := bondNow{Edge: b.EdgeID, BondID: b.BondID, UptimeS: b.Uptime.Seconds(), MTU: b.MTU, MTUConfigured: b.MTUConfigured, MTUReason: b.MTUReason,
		TxPackets: b.TxPackets, RxPackets: b.RxPackets, LinkLoss: -1}
	for _, a := range b.Addresses {
		n.Addresses = append(n.Addresses, a.String())
	}
	for i := range b.Paths {
		p := &b.Paths[i]
		var ps *pathState
		for _, q := range bs.paths {
			if q.now.Name == p.Name {
				ps = q
			}
		}
		if ps == nil {
			ps = &pathState{}
			for j := range ps.spark {
				ps.spark[j] = -1
			}
			if bs.full != nil {
				ps.full = &pathHist{since: h.tick}
			}
		}
		var pp *tunnel.PathStats
		if prev != nil {
			for j := range prev.Paths {
				if prev.Paths[j].Name == p.Name {
					pp = &prev.Paths[j]
				}
			}
		}
		old := ps.now
		ps.now = computePath(p, pp, dt, role)
		ps.raw = *p
		if pp != nil {
			if st, ost := stateText(ps.now), stateText(old); st != ost {
				h.event(now, b.EdgeID, p.Name, "state", ost+" → "+st)
			}
			if p.DatagramBudget != pp.DatagramBudget && pp.DatagramBudget != 0 {
				text := "path MTU " + itoa(pp.DatagramBudget) + " → " + itoa(p.DatagramBudget) + " bytes"
				if p.PMTUReason != "" {
					text += ": " + p.PMTUReason
				}
				h.event(now, b.EdgeID, p.Name, "mtu", text)
			}
		}
		up := p.Status != "UNAVAILABLE"
		n.Up = n.Up || up
		if up {
			n.Paths++
			n.SumRateBps += ps.now.AllowedBps
		}
		n.DeliveredBps += ps.now.DeliveredBps
		n.InBps += ps.now.InBps
		n.OutBps += ps.now.SentBps
		if ps.now.LinkLoss > n.LinkLoss && up {
			n.LinkLoss = ps.now.LinkLoss
		}
		n.FramesHit += p.ObjectsDropped
		paths = append(paths, ps)
	}
	if prev != nil && b.MTU != prev.MTU {
		text := "bond MTU " + itoa(prev.MTU) + " → " + itoa(b.MTU)
		if b.MTUReason != "" {
			text += ": " + b.MTUReason
		}
		h.event(now, b.EdgeID, "", "mtu", text)
	}
	if prev != nil && n.Up != bs.now.Up {
		h.event(now, b.EdgeID, "", "bond", map[bool]string{true: "bond up", false: "bond down: no path"}[n.Up])
	}
	computeBond(&n, b, prev, dt)
	bs.now, bs.paths, bs.raw, bs.prevT = n, paths, *b, now
	cp := *b
	bs.prev = &cp
	bs.countRules(b)
	bs.record(h.tick)
}

// record writes the current values into the sparklines and, for a
// detailed bond, the history.
func (bs *bondState) record(tick uint64) {
	for _, p := range bs.paths {
		v := p.now.DeliveredBps
		if p.now.InBps > v {
			v = p.now.InBps
		}
		p.spark[tick%sparkLen] = float32(v)
		if f := p.full; f != nil {
			i := tick % histLen
			f.allowed[i], f.sent[i], f.delivered[i] = float32(p.now.AllowedBps), float32(p.now.SentBps), float32(p.now.DeliveredBps)
			f.rtt[i], f.queue[i], f.loss[i] = float32(p.now.RTTms), float32(p.now.QueueDelayMs), float32(p.now.LinkLoss)
		}
	}
	if f := bs.full; f != nil {
		i := tick % histLen
		f.delivered[i], f.sum[i] = float32(bs.now.DeliveredBps), float32(bs.now.SumRateBps)
	}
}

// countRules keeps a minute of rule hit totals, restarting when the rule
// set changes (its counters restart from zero).
func (bs *bondState) countRules(b *status.Bond) {
	hits := map[string][2]uint64{}
	if b.Rules != nil {
		for _, r := range b.Rules.Rules {
			hits[r.ID] = [2]uint64{r.Hits, r.Bytes}
		}
	}
	copy(bs.rules[1:], bs.rules[:rulesWindow])
	bs.rules[0] = hits
}

// reportEvents derives the events of the report's node-wide parts: rule
// reloads, fleet moves and BGP sessions.
func (h *hub) reportEvents(rep *status.Report, now time.Time) {
	if r, p := rep.Rules, h.prevRules; r != nil && p != nil {
		if r.Version != p.Version {
			h.event(now, "", "", "rules", "rules reloaded: version "+itoa(int(r.Version))+", "+itoa(r.Rules)+" rules from "+r.File)
		}
		if r.ReloadFailures != p.ReloadFailures {
			text := "rule reload rejected, the running rules stay"
			if r.LastError != "" {
				text += ": " + r.LastError
			}
			h.event(now, "", "", "rules", text)
		}
	}
	h.prevRules = rep.Rules
	if f, p := rep.Fleet, h.prevFleet; f != nil && p != nil && f.Current != p.Current {
		h.event(now, "", "", "fleet", "moved from node "+p.Current+" to "+f.Current)
	}
	h.prevFleet = rep.Fleet
	if b := rep.BGP; b != nil {
		for _, n := range b.Neighbors {
			a := n.Address.String()
			if old, ok := h.prevBGP[a]; ok && old != n.State {
				text := "BGP neighbour " + a + ": " + old + " → " + n.State
				if n.LastError != "" {
					text += " (" + n.LastError + ")"
				}
				h.event(now, "", "", "bgp", text)
			}
			h.prevBGP[a] = n.State
		}
	}
}
