package tunnel

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/monoclock"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/tun"
)

// Bond is the set of paths between one edge and the concentrator, and the
// state they share: the bond-wide sequence number, the duplicate filter,
// the TUN device packets are written to, and the counters.
//
// On the edge a Bond belongs to an [Edge]; on the concentrator there is one
// per configured edge, with no paths until the edge connects.
type Bond struct {
	edgeID string
	log    *slog.Logger
	dev    tun.Device
	mtu    int // bytes: inner packets longer than this get an ICMP error
	picker policy.Picker
	// movesAged is set when picker is the default, LowestRTT: frames a
	// slowed path holds too long move (path.moveAged).
	movesAged bool
	popts     PathOptions
	allowed   []netip.Prefix // inner sources accepted from the peer; nil: any
	started   atomic.Int64   // monoclock ns: creation, or the peer's last restart (new bond id)

	seq atomic.Uint64 // next bond sequence number to send
	// pathSeq is set once the peer negotiated the "rate" capability: the
	// headers then carry FlagPathSeq (ratectl.go).
	pathSeq atomic.Bool

	fecTx     *fecSender   // nil when FEC is off
	dec       *fec.Decoder // receive side; safe for concurrent use
	fecLastRx uint64       // rxPackets at the last fecExpireTick; owned by it
	rules     *ruleState   // nil without a rule source; owned by the TUN reader

	// Per-flow sequencing (flowtag.go, reseq_stage.go). The send side tags
	// only while peerTags is set: the peer announced ctrlmsg.CapFlowTags
	// in its hello (or hello reply). flows, cls and md are owned by the
	// TUN reader; cls classifies packets for reseqWait when no rule set
	// is in force. cls (about 40 KiB) is made from clsOpts by the first
	// packet that needs it (classifier): an idle bond holds none. reseq
	// is the receive side; reseqWrite writes what it releases, always
	// under reseq's mutex, with reseqWbuf as its scratch.
	peerTags   atomic.Bool
	flows      *flowTable
	cls        *classify.Classifier
	clsOpts    classify.Options
	md         classify.Metadata
	reseq      *reseqRx
	reseqWrite deliverFunc
	reseqWbuf  [][]byte

	// ctl is the control plane's session state on the concentrator
	// (ctrl_conc.go); nil on the edge. ctlCtr counts control messages on
	// both ends.
	ctl    *bondControl
	ctlCtr ctrlCounters

	// paths is the current path set, replaced copy-on-write under pathsMu
	// and read lock-free on the per-packet path.
	paths   atomic.Pointer[pathSet]
	pathsMu sync.Mutex

	// Send-side scratch, owned by the one goroutine that reads the TUN.
	objs    objTracker // bytes so far of the frames being sent (objdeadline.go)
	picks   []int
	sel     policy.Scratch
	icmpBuf []byte
	wbuf    [][]byte

	rx struct {
		sync.Mutex // guards the following
		bondID     uint64
		dedupe     dedupe
	}

	ctr   bondCounters
	drops dropCounters // bond-scope reasons (DropReason)
	idle  bondIdle     // asleep or awake, and the bond's timers (idle.go)
	// sendsKeepalives is set on the edge: it keeps its paths alive
	// (liveness.go); the concentrator sends no keepalives of its own.
	sendsKeepalives bool
	// peerMoved, on the concentrator, is told the new address of a path
	// connection's peer that migrated (checkPeer, liveness.go) and the
	// connection's context; nil on the edge.
	peerMoved func(addr netip.AddrPort, conn context.Context)

	// Path MTU (pmtu.go). sendMTU is the inner MTU packets are checked
	// against, bytes (at most mtu); minBudget the smallest datagram budget
	// of the connected paths, bytes; both read per packet. mtuMu orders
	// their updates (updateMTU); mtuReason says why sendMTU < mtu.
	sendMTU, minBudget atomic.Int64
	mtuMu              sync.Mutex
	mtuReason          atomic.Pointer[string]
	// setTUNMTU sets the device MTU (EdgeOptions.SetTUNMTU; nil on the
	// concentrator, whose device all bonds share); tunMu guards tunMTU,
	// the MTU last set.
	setTUNMTU func(int) error
	tunMu     sync.Mutex
	tunMTU    int
	fit       fitScratch // the TUN reader's
}

// classifier returns the bond's classifier, made on first use. Called only
// from the TUN reader goroutine.
func (b *Bond) classifier() *classify.Classifier {
	if b.cls == nil {
		b.cls, _ = classify.New(b.clsOpts) // newBond checked the options
	}
	return b.cls
}

// pathSet is an immutable snapshot of a bond's paths, with the policy view
// of each at the same index.
type pathSet struct {
	paths  []*path
	states []*policy.Path
}

// bondCounters count per-packet events that are not drops (drops.go).
type bondCounters struct {
	txPackets, rxPackets atomic.Uint64
	icmpSent, mssClamped atomic.Uint64
	flowTagged           atomic.Uint64
	mtuChanges           atomic.Uint64
}

// bondOptions are what newBond needs beyond the edge id and device.
type bondOptions struct {
	mtu      int
	picker   policy.Picker
	paths    PathOptions
	fec      FECOptions
	rules    RuleSource
	classify classify.Options
	allowed  []netip.Prefix
	reseq    ReseqOptions
	log      *slog.Logger
	// peer is, on the concentrator, the edge the bond serves: its control
	// plane (ctrl_conc.go) is built from it. nil on the edge.
	peer *EdgeAuth
	// setTUNMTU sets the device MTU; nil: never (pmtu.go).
	setTUNMTU func(int) error
	// keepalives: the bond's end sends keepalives (the edge's).
	keepalives bool
	// peerMoved: see Bond.peerMoved.
	peerMoved func(addr netip.AddrPort, conn context.Context)
}

func newBond(edgeID string, dev tun.Device, o bondOptions) (*Bond, error) {
	mtu, picker, popts, fopts, allowed, log := o.mtu, o.picker, o.paths, o.fec, o.allowed, orDiscard(o.log)
	if picker == nil {
		picker = policy.LowestRTT{}
	}
	if fopts.Mode != FECOff && policy.PlacementSpreadsData(fopts.Placement) {
		picker = &policy.RateSpread{} // FECOptions.Placement: spread data by rate
	}
	src := o.rules
	var ctl *bondControl
	if o.peer != nil {
		ctl = newBondControl(o.peer, o.rules, o.classify.Classes, log)
		if o.peer.AllowEdgeRules { // downlink rules: the concentrator's plus the edge's
			src = ctl
		}
	}
	rs, err := newRuleState(src, o.classify)
	if err != nil {
		return nil, err
	}
	if _, err := classify.New(o.classify); err != nil { // checks the options; the bond's own comes with its first packet (classifier)
		return nil, err
	}
	// A protected payload may carry a flow tag in front of the inner packet.
	dec, err := fec.NewDecoder(fec.DecoderOptions{MaxPacketLen: max(mtu+MaxFlowTagLen, fec.DefaultMaxPacketLen)})
	if err != nil {
		return nil, err
	}
	b := &Bond{
		edgeID:          edgeID,
		log:             log,
		dev:             dev,
		mtu:             mtu,
		picker:          picker,
		movesAged:       picker == policy.Picker(policy.LowestRTT{}),
		popts:           popts,
		allowed:         allowed,
		icmpBuf:         make([]byte, 0, 1500),
		wbuf:            make([][]byte, 1),
		dec:             dec,
		rules:           rs,
		ctl:             ctl,
		flows:           newFlowTable(0, 0),
		clsOpts:         o.classify,
		reseq:           newReseqRx(o.reseq),
		reseqWbuf:       make([][]byte, 1),
		setTUNMTU:       o.setTUNMTU,
		tunMTU:          mtu,
		sendsKeepalives: o.keepalives,
		peerMoved:       o.peerMoved,
		fit:             newFitScratch(),
	}
	b.sendMTU.Store(int64(mtu))
	b.minBudget.Store(int64(mtu + HeaderBudget))
	b.reseqWrite = func(pkt []byte, off int) { b.deliver(pkt, off, b.reseqWbuf) }
	if ctl != nil {
		ctl.bond = b
	}
	if fopts.Mode != FECOff {
		if b.fecTx, err = newFECSender(fopts, mtu); err != nil {
			return nil, err
		}
	}
	b.paths.Store(&pathSet{})
	b.started.Store(monoclock.Now())
	return b, nil
}

// pathFor returns the bond's path named name, creating it with labels if it
// does not exist. At most maxPaths paths exist per bond; ok is false past it.
func (b *Bond) pathFor(name string, labels map[string]string) (p *path, ok bool) {
	b.pathsMu.Lock()
	defer b.pathsMu.Unlock()
	cur := b.paths.Load()
	for _, p := range cur.paths {
		if p.name == name {
			return p, true
		}
	}
	if len(cur.paths) >= maxPaths {
		return nil, false
	}
	p = newPath(b, name, labels)
	next := &pathSet{
		paths:  append(append([]*path(nil), cur.paths...), p),
		states: append(append([]*policy.Path(nil), cur.states...), p.state),
	}
	b.paths.Store(next)
	return p, true
}

// adoptBondID records the edge's bond id. A new id means the edge restarted:
// its sequence numbers start over, so the duplicate filter is reset and the
// old process's connections are closed.
func (b *Bond) adoptBondID(id uint64) (changed bool) {
	b.rx.Lock()
	changed = b.rx.bondID != id
	if changed {
		b.rx.bondID = id
		b.rx.dedupe.reset()
		b.dec.Reset()
		b.reseq.reset() // the restarted peer numbers its flows afresh
		b.started.Store(monoclock.Now())
	}
	b.rx.Unlock()
	return changed
}

// closePaths closes every connection of every path with code.
func (b *Bond) closePaths(code quic.ApplicationErrorCode, msg string) {
	for _, p := range b.paths.Load().paths {
		if c := p.pc.conn.Load(); c != nil {
			c.CloseWithError(code, msg)
		}
	}
}

// Stats returns a snapshot of the bond's counters and paths.
func (b *Bond) Stats() BondStats {
	b.rx.Lock()
	id := b.rx.bondID
	b.rx.Unlock()
	s := BondStats{
		EdgeID:        b.edgeID,
		BondID:        id,
		Uptime:        time.Duration(monoclock.Now() - b.started.Load()),
		MTU:           int(b.sendMTU.Load()),
		MTUConfigured: b.mtu,
		MTUChanges:    b.ctr.mtuChanges.Load(),
		TxPackets:     b.ctr.txPackets.Load(),
		RxPackets:     b.ctr.rxPackets.Load(),
		Drops:         b.drops.snapshot(BondDropReasons),
		ICMPSent:      b.ctr.icmpSent.Load(),
		MSSClamped:    b.ctr.mssClamped.Load(),
		FEC:           b.fecStats(),
		Rules:         b.rules.stats(),
		FlowTagged:    b.ctr.flowTagged.Load(),
		FlowUntagged:  b.flows.full.Load(),
		Control:       b.controlStats(),
		PeerPaths:     b.ctl.peerReport(),
	}
	if r := b.mtuReason.Load(); r != nil {
		s.MTUReason = *r
	}
	rs, _ := b.reseq.stats() // malformed tags are drops (DropBadFlowTag)
	s.Reseq = &rs
	now := time.Now()
	s.Paths = make([]PathStats, 0, len(b.paths.Load().paths)) // [] in JSON, not null, before any path
	for _, p := range b.paths.Load().paths {
		s.Paths = append(s.Paths, p.stats(now))
	}
	s.addPolicyStats(b.paths.Load().states, now)
	return s
}
