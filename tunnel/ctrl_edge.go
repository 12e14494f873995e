package tunnel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

// The edge's side of the control plane (MoMQ appendix A.2). Every
// connection's hello offers all capabilities (ctrlmsg.CapsAll); its control
// stream is then read by routineControlReader, which takes the
// PATH_MAPPING_RESULTs. One goroutine, routineControlWriter, writes: on the
// carrier, the control stream of the first live connection (uplinks in
// configuration order), it sends
//
//   - PATH_STATE_REPORT with every uplink's status and labels whenever one
//     changed, at most once per smoothed RTT of the carrier's path (and
//     no more often than every ctrlMinReportInterval);
//   - PATH_LABEL_UPDATE for each uplink whose labels Edge.SetLabels set;
//   - PATH_MAPPING_RULE installs and removes that bring the concentrator's
//     copy of EdgeOptions.DownlinkRules in line with the set in force,
//     paced below the concentrator's install limit.
//
// When the carrier changes (its connection died, or the edge restarted its
// session) everything is sent again on the new one: a fresh report, every
// label update, every rule.

// Timing of the edge's control plane.
const (
	// ctrlMinReportInterval is the shortest gap between two reports, and
	// the poll period of routineControlWriter on a path without an RTT sample.
	ctrlMinReportInterval = 50 * time.Millisecond
	// ctrlRuleRetry is how long a rule the concentrator REJECTED waits
	// before it is sent again.
	ctrlRuleRetry = 5 * time.Second
	// ctrlEdgeOpsPerSecond paces the edge's rule operations, below
	// rules.MaxInstallsPerSecond so that jitter on the way does not make
	// the concentrator's limiter refuse them.
	ctrlEdgeOpsPerSecond = rules.MaxInstallsPerSecond - 2
)

// edgeControl is the edge's control-plane state. The zero value is ready.
type edgeControl struct {
	start    sync.Once
	bellOnce sync.Once
	bell     chan struct{} // capacity 1: something to send; see doorbell

	mu      sync.Mutex                   // guards the following
	streams []*ctrlConn                  // live control streams
	labels  map[string]map[string]string // by uplink: labels from SetLabels (nil: back to the configured ones)
	results []ctrlmsg.MappingResult      // received, not yet handled by routineControlWriter
}

// ctrlConn is one connection's control stream on the edge.
type ctrlConn struct {
	conn *quic.Conn
	str  *quic.Stream
	path int // index in Edge.paths
	caps ctrlmsg.Caps
	dead atomic.Bool // a write failed: not a carrier any more
	wmu  sync.Mutex  // serialises writes: the control writer's and the rate feedback's
}

// doorbell returns the channel that wakes routineControlWriter.
func (ec *edgeControl) doorbell() chan struct{} {
	ec.bellOnce.Do(func() { ec.bell = make(chan struct{}, 1) })
	return ec.bell
}

// ring wakes routineControlWriter; it never blocks.
func (ec *edgeControl) ring() {
	select {
	case ec.doorbell() <- struct{}{}:
	default:
	}
}

// attachControl takes over a connection's control stream after a hello
// reply that accepted caps: it starts the stream's reader and, once, the
// edge's routineControlWriter. It is called from the dial, inside e.wg.
func (e *Edge) attachControl(conn *quic.Conn, str *quic.Stream, pathName string, caps ctrlmsg.Caps) {
	ec := &e.ctl
	ec.start.Do(func() { e.wg.Go(e.routineControlWriter) })
	idx := 0
	for i, p := range e.paths {
		if p.name == pathName {
			idx = i
		}
	}
	cc := &ctrlConn{conn: conn, str: str, path: idx, caps: caps}
	ec.mu.Lock()
	ec.streams = append(ec.streams, cc)
	ec.mu.Unlock()
	ec.ring()
	stopFeedback := func() {}
	if p := e.paths[idx]; caps&ctrlmsg.CapRate != 0 {
		p.rc.setPeer(caps, time.Now())
		stopFeedback = p.rc.startFeedback(conn, str, &cc.wmu)
	}
	e.wg.Go(func() {
		e.routineControlReader(cc)
		stopFeedback()
		ec.mu.Lock()
		for i, s := range ec.streams {
			if s == cc {
				ec.streams = append(ec.streams[:i], ec.streams[i+1:]...)
				break
			}
		}
		ec.mu.Unlock()
		ec.ring()
	})
}

// routineControlReader reads what the concentrator sends on one control
// stream until it ends. A PATH_MAPPING_RESULT on a connection that did not
// negotiate path_mapping, a message only the edge sends, a second hello
// reply or a message that does not parse is a protocol violation: the
// connection is closed with codeProtocol and the violation counted.
func (e *Edge) routineControlReader(cc *ctrlConn) {
	ec, ctr := &e.ctl, &e.bond.ctlCtr
	log := e.log.With("path", e.paths[cc.path].name)
	violation := func(why string) {
		ctr.violations.Add(1)
		log.Warn("control protocol violation: closing the connection", "err", why)
		cc.conn.CloseWithError(codeProtocol, "control: protocol violation")
	}
	for {
		msg, why, err := readControl(cc.str, cc.caps, ctrlmsg.FromConcentrator, ctr)
		if err != nil {
			return
		}
		if why != "" {
			violation(why)
			return
		}
		if fb, ok := msg.(*ctrlmsg.RateFeedback); ok {
			e.bond.onRateFeedback(fb, time.Now())
			continue
		}
		res, ok := msg.(*ctrlmsg.MappingResult)
		if !ok {
			continue // a concentrator message this side does not act on
		}
		ec.mu.Lock()
		if len(ec.results) < 4*rules.MaxRules { // bounded: routineControlWriter drains it
			ec.results = append(ec.results, *res)
		}
		ec.mu.Unlock()
		ec.ring()
	}
}

// SetLabels sets the labels of the named uplink: the edge's own
// scheduler uses them at once, and the concentrator receives them in a
// PATH_LABEL_UPDATE (MoMQ A.2), where they override the labels from the
// hello for descriptive keys only (cost_class and the concentrator's
// EdgeAuth.PolicyLabelKeys stay). nil goes back to the configured labels.
// labels is copied. It returns an error for an unknown uplink or labels
// outside the limits (at most 32 labels, keys of 1..128 bytes of
// [A-Za-z0-9_.:/-], values of 1..1024 bytes).
func (e *Edge) SetLabels(uplink string, labels map[string]string) error {
	var p *path
	for _, q := range e.paths {
		if q.name == uplink {
			p = q
		}
	}
	if p == nil {
		return fmt.Errorf("tunnel: no uplink %q", uplink)
	}
	if err := ctrlmsg.CheckLabels(labels); err != nil {
		return fmt.Errorf("tunnel: labels of %s: %w", uplink, err)
	}
	labels = maps.Clone(labels)
	p.state.SetLabels(labels)
	ec := &e.ctl
	ec.mu.Lock()
	if ec.labels == nil {
		ec.labels = map[string]map[string]string{}
	}
	ec.labels[uplink] = labels
	ec.mu.Unlock()
	ec.ring()
	return nil
}

// carrier returns the live control stream that carries the edge's
// messages: cur while it lives (a change of carrier sends everything
// again), else the first live one in uplink order (of one uplink's, the
// oldest); nil when none lives.
func (ec *edgeControl) carrier(cur *ctrlConn) *ctrlConn {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	var best *ctrlConn
	for _, s := range ec.streams {
		if s.dead.Load() || s.conn.Context().Err() != nil {
			continue
		}
		if s == cur {
			return cur
		}
		if best == nil || s.path < best.path {
			best = s
		}
	}
	return best
}

// edgeRuleState is routineControlWriter's view of the rules the carrier's
// session holds.
type edgeRuleState struct {
	sent    map[string][]byte      // rule id → the install sent
	pending map[uint64]pendingRule // by request id
	retry   map[string]time.Time   // rule id → not before
	req     uint64                 // last request id
	pacer   pacer
	denied  bool // NOT_AUTHORIZED: send nothing more on this carrier
}

// pendingRule is an operation awaiting its result.
type pendingRule struct {
	id      string
	install bool
}

// routineControlWriter writes the edge's control messages on the carrier (see
// the top of this file). It stops with the edge.
func (e *Edge) routineControlWriter() {
	e.log.Debug("routineControlWriter started")
	defer e.log.Debug("routineControlWriter stopped")
	ec := &e.ctl
	var (
		carrier    *ctrlConn
		seq        uint64 // PATH_STATE_REPORT sequence number, monotonic for the bond id
		lastReport []byte // the last report sent, without its sequence number
		reportAt   time.Time
		labelsSent map[string]map[string]string
		rs         edgeRuleState
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-ec.doorbell():
		case <-timer.C:
		}
		now := time.Now()
		cur := ec.carrier(carrier)
		if cur != carrier { // a new carrier: send everything again
			carrier, lastReport, labelsSent = cur, nil, map[string]map[string]string{}
			rs = edgeRuleState{sent: map[string][]byte{}, pending: map[uint64]pendingRule{}, retry: map[string]time.Time{}, req: rs.req}
			if carrier != nil {
				e.log.Debug("control carrier", "path", e.paths[carrier.path].name, "caps", carrier.caps.Names())
			}
		}
		interval := ctrlMinReportInterval
		if carrier == nil {
			// Nothing to write on until a control stream attaches or
			// another comes back: both ring the doorbell (attachControl,
			// the stream's reader ending), so the writer sleeps rather
			// than polling every interval while the edge redials.
			continue
		}
		interval = max(interval, e.paths[carrier.path].state.SmoothedRTT())
		send := func(v any) bool {
			err := writeControl(carrier.conn, carrier.str, &carrier.wmu, v)
			if errors.Is(err, ctrlmsg.ErrEncode) {
				// No stream would take it (labels too long for one
				// message): skip it, keep the carrier.
				e.log.Warn("control message not sent", "err", err)
				return true
			}
			if err != nil {
				// Not a carrier any more, busy or not: the writer moves
				// to the next live stream at once (the doorbell), and
				// the new carrier gets everything again.
				logControlWrite(e.log, e.paths[carrier.path].name, err)
				carrier.dead.Store(true)
				ec.ring()
				return false
			}
			e.bond.ctlCtr.sent.Add(1)
			return true
		}
		if carrier.caps&ctrlmsg.CapState != 0 && now.Sub(reportAt) >= interval {
			rep := e.stateReport(now)
			if b, _ := json.Marshal(rep); !bytes.Equal(b, lastReport) {
				seq++
				rep.Seq = seq
				if !send(rep) {
					continue
				}
				lastReport, reportAt = b, now
			}
		}
		if carrier.caps&ctrlmsg.CapLabels != 0 {
			ec.mu.Lock()
			var updates []ctrlmsg.LabelUpdate
			for name, l := range ec.labels {
				if sent, ok := labelsSent[name]; !ok || !maps.Equal(sent, l) || (sent == nil) != (l == nil) {
					updates = append(updates, ctrlmsg.LabelUpdate{Type: ctrlmsg.TypeLabelUpdate, Path: name, Labels: l})
				}
			}
			ec.mu.Unlock()
			for _, u := range updates {
				if !send(&u) {
					break
				}
				labelsSent[u.Path] = u.Labels
			}
		}
		if carrier.caps&ctrlmsg.CapMapping != 0 && e.opts.DownlinkRules != nil && !carrier.dead.Load() {
			e.syncRules(&rs, send, now)
		}
		if e.bond.asleep() && len(rs.pending) == 0 {
			// Little moves on an idle bond: report at its keepalive
			// (waking rings the doorbell, idle.go), or every second
			// while downlink rules may wait for a retry.
			interval = e.opts.Paths.IdleKeepalive
			if e.opts.DownlinkRules != nil {
				interval = min(interval, time.Second)
			}
		}
		timer.Reset(interval)
	}
}

// stateReport builds a PATH_STATE_REPORT of every uplink, without its
// sequence number.
func (e *Edge) stateReport(now time.Time) *ctrlmsg.StateReport {
	rep := &ctrlmsg.StateReport{Type: ctrlmsg.TypeStateReport}
	for _, p := range e.paths {
		rep.Paths = append(rep.Paths, ctrlmsg.PathReport{Path: p.name, Status: p.state.Status(now).String(), Labels: p.state.CurrentLabels()})
	}
	return rep
}

// syncRules handles the results received, then sends the installs and
// removes that make the carrier's session hold the downlink rule set in
// force, as far as the pacer allows.
func (e *Edge) syncRules(rs *edgeRuleState, send func(any) bool, now time.Time) {
	ec := &e.ctl
	set := e.opts.DownlinkRules.Current()
	ec.mu.Lock()
	results := ec.results
	ec.results = nil
	ec.mu.Unlock()
	for _, r := range results {
		e.onResult(rs, set, &r, now)
	}
	if rs.denied {
		return
	}
	want := map[string]*rules.Rule{}
	for i := range set.Len() {
		r := set.Rule(i)
		want[r.ID] = &r
	}
	for id := range rs.sent { // removes first: they make room
		if _, ok := want[id]; ok {
			continue
		}
		if !rs.pacer.allow(now) {
			return
		}
		rs.req++
		if !send(&ctrlmsg.MappingRule{Type: ctrlmsg.TypeMappingRule, Request: rs.req, Op: ctrlmsg.OpRemove, ID: id}) {
			return
		}
		rs.pending[rs.req] = pendingRule{id: id}
		delete(rs.sent, id)
	}
	for i := range set.Len() {
		r := set.Rule(i)
		if len(r.ID) > ctrlmsg.MaxRuleIDLen || now.Before(rs.retry[r.ID]) {
			continue
		}
		m := ctrlmsg.InstallOf(0, &r)
		b, _ := json.Marshal(m)
		if bytes.Equal(rs.sent[r.ID], b) {
			continue
		}
		if !rs.pacer.allow(now) {
			return
		}
		rs.req++
		m.Request = rs.req
		if !send(m) {
			return
		}
		rs.pending[rs.req] = pendingRule{id: r.ID, install: true}
		rs.sent[r.ID] = b
	}
}

// onResult takes one PATH_MAPPING_RESULT: counts it, logs a refusal with
// the rule's place in the edge's file, and schedules a REJECTED install
// for another try.
func (e *Edge) onResult(rs *edgeRuleState, set *rules.Set, r *ctrlmsg.MappingResult, now time.Time) {
	ctr := &e.bond.ctlCtr
	op, ok := rs.pending[r.Request]
	if !ok || op.id != r.ID {
		return // for an earlier carrier
	}
	delete(rs.pending, r.Request)
	where := set.Name()
	if i := set.Index(r.ID); i >= 0 {
		where = fmt.Sprintf("%s:%d", set.Name(), set.Rule(i).Line)
	}
	level := slog.LevelWarn
	switch r.Status {
	case ctrlmsg.ResultOK:
		ctr.rulesOK.Add(1)
		level = slog.LevelDebug
	case ctrlmsg.ResultRejected:
		ctr.rulesRejected.Add(1)
		if op.install {
			delete(rs.sent, r.ID)
			rs.retry[r.ID] = now.Add(ctrlRuleRetry)
		}
	case ctrlmsg.ResultNotAuthorized:
		ctr.rulesNotAuthorized.Add(1)
		rs.denied = true
	case ctrlmsg.ResultInvalidRule:
		ctr.rulesInvalid.Add(1)
	case ctrlmsg.ResultNotFound:
		ctr.rulesNotFound.Add(1)
	}
	e.log.Log(e.ctx, level, "downlink rule "+r.Status, "rule", r.ID, "at", where, "reason", r.Reason)
}

// pacer is a token bucket of ctrlEdgeOpsPerSecond tokens refilled at that
// rate per second; it starts full. Not safe for concurrent use.
type pacer struct {
	tokens float64
	last   time.Time
}

func (p *pacer) allow(now time.Time) bool {
	if p.last.IsZero() {
		p.tokens, p.last = ctrlEdgeOpsPerSecond, now
	} else if dt := now.Sub(p.last); dt > 0 {
		p.tokens = min(ctrlEdgeOpsPerSecond, p.tokens+dt.Seconds()*ctrlEdgeOpsPerSecond)
		p.last = now
	}
	if p.tokens < 1 {
		return false
	}
	p.tokens--
	return true
}
