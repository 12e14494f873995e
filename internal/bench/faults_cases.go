package bench

// The fault matrix's cases (docs/operations.md, "Fault matrix"): what each
// fault does to the bed, how long it lasts, and its target.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/bondd/bondd/tunnel"
)

// faultCase is one fault.
type faultCase struct {
	name string
	// prefer: also run under a rule preferring the faulted path;
	// onlyPrefer: only under it.
	prefer, onlyPrefer bool
	// path: the fault hits one uplink: the carrier of the probe under
	// the default rules, preferPath under the prefer rule; fixedPath, when
	// set, whatever the rules.
	path                  bool
	preferPath, fixedPath string
	probeSize             int
	// hold is how long the fault lasts before heal.
	hold time.Duration
	// fromHeal: recover_ms counts from the heal, not the onset (a fault
	// nothing can mask while it lasts).
	fromHeal     bool
	inject, heal func(ctx context.Context, b *faultBed, c *caseRun) error
	target       func(r *FaultResult) (string, bool)
}

// caseRun is what a case's inject and heal share.
type caseRun struct {
	path        string // the faulted uplink, "" for the whole bond
	killed      time.Time
	exit        time.Duration
	listening   time.Time
	holdFor     time.Duration // the case's hold (the garbage flood's length)
	garbageSent uint64
	garbageDone chan struct{}
}

// faultCases returns the matrix; short is the integration test's
// version (shorter faults, the prefer rule set for the path faults that
// a rule could make worse only).
func faultCases(short bool) []faultCase {
	d := func(full, shortD time.Duration) time.Duration {
		if short {
			return shortD
		}
		return full
	}
	gapTarget := func(r *FaultResult) (string, bool) {
		b := max(3*r.RTTms, 150)
		return fmt.Sprintf("gap ≤ %.0f ms", b), r.GapMs <= b
	}
	return []faultCase{
		{name: "blackhole", prefer: true, path: true, preferPath: "up1", hold: d(3*time.Second, 1500*time.Millisecond),
			inject: blackhole(true), heal: blackhole(false), target: gapTarget},
		{name: "ipv6-blackhole", prefer: true, onlyPrefer: true, path: true, preferPath: "up2", fixedPath: "up2", hold: d(3*time.Second, 1500*time.Millisecond),
			inject: blackhole(true), heal: blackhole(false), target: gapTarget},
		{name: "mtu-blackhole", prefer: true, path: true, preferPath: "up1", probeSize: faultsProbeFull, hold: d(10*time.Second, 4*time.Second),
			inject: mtuBlackhole(true), heal: mtuBlackhole(false),
			target: func(r *FaultResult) (string, bool) {
				return "restored ≤ 3000 ms, late ≤ 1000 ms", r.RecoverMs >= 0 && r.RecoverMs <= 3000 && r.LateMs <= 1000
			}},
		{name: "link-down", prefer: !short, path: true, preferPath: "up1", hold: d(20*time.Second, 2*time.Second),
			inject: linkDown(true), heal: linkDown(false), target: gapTarget},
		{name: "address-change", prefer: !short, path: true, preferPath: "up1", hold: d(3*time.Second, 1500*time.Millisecond),
			inject: addressChange(true), heal: addressChange(false), target: gapTarget},
		{name: "all-down", prefer: !short, hold: d(30*time.Second, 3*time.Second), fromHeal: true,
			inject: allDown(true), heal: allDown(false),
			target: func(r *FaultResult) (string, bool) {
				return "restored ≤ 1500 ms after the links return", r.RecoverMs >= 0 && r.RecoverMs <= 1500
			}},
		{name: "conc-kill", prefer: !short, inject: concStop(syscall.SIGKILL), heal: concRestart,
			target: func(r *FaultResult) (string, bool) {
				return fmt.Sprintf("gap ≤ restart + 1000 = %.0f ms", r.RestartMs+1000), r.GapMs <= r.RestartMs+1000
			}},
		{name: "conc-term", prefer: !short, inject: concStop(syscall.SIGTERM), heal: concRestart,
			target: func(r *FaultResult) (string, bool) {
				return fmt.Sprintf("exit ≤ 500 ms, gap ≤ restart + 1000 = %.0f ms", r.RestartMs+1000), r.ExitMs <= 500 && r.GapMs <= r.RestartMs+1000
			}},
		{name: "garbage", prefer: !short, hold: d(10*time.Second, 2*time.Second), inject: garbageStart, heal: garbageWait,
			target: func(r *FaultResult) (string, bool) {
				loss := 100 * float64(r.Lost) / float64(max(r.Sent, 1))
				return "all garbage counted, probe loss ≤ 0.1 %", r.GarbageCounted >= r.GarbageSent && loss <= 0.1
			}},
	}
}

// uplinkIndex returns the index of the named uplink in faultUplinks.
func uplinkIndex(name string) int {
	for i, u := range faultUplinks {
		if u.name == name {
			return i
		}
	}
	return -1
}

// addrArgs returns ip addr arguments for prefix on dev (nodad for IPv6).
func addrArgs(op, prefix, dev string) []string {
	a := []string{"addr", op, prefix, "dev", dev}
	if strings.Contains(prefix, ":") && op == "add" {
		a = append(a, "nodad")
	}
	return a
}

// blackhole removes (on) or restores the concentrator's address on the
// path's veth: what the edge sends there is dropped silently (no
// forwarding, no ICMP), nothing comes back, and the link stays up.
func blackhole(on bool) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, c *caseRun) error {
		op := "add"
		if on {
			op = "del"
		}
		return ip(b.conc, addrArgs(op, faultUplinks[uplinkIndex(c.path)].conc, c.path)...)
	}
}

// mtuBlackhole sets the concentrator's end of the path's veth to MTU
// 1296 (on) or 1500: the veth then drops, silently, every IP packet over
// 1300 bytes the edge sends on that path (a veth drops frames longer than
// the receiving end's MTU + 18 bytes of Ethernet and VLAN header, with no
// ICMP); small packets pass. The concentrator's own sends over 1296 bytes
// on that path fail locally.
func mtuBlackhole(on bool) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, c *caseRun) error {
		mtu := "1500"
		if on {
			mtu = "1296"
		}
		return ip(b.conc, "link", "set", "dev", c.path, "mtu", mtu)
	}
}

// linkDown sets the edge's uplink down (on) or up.
func linkDown(on bool) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, c *caseRun) error {
		return b.edge.SetLinkUp(c.path, !on)
	}
}

// addressChange moves the edge's address on the uplink to the next host
// address of its subnet (on) and back: the path's source address changes
// under a live connection (a new DHCP lease, NAT rebinding).
func addressChange(on bool) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, c *caseRun) error {
		u := faultUplinks[uplinkIndex(c.path)]
		old := netip.MustParsePrefix(u.edge)
		moved := netip.PrefixFrom(old.Addr().Next(), old.Bits()).String()
		from, to := u.edge, moved
		if !on {
			from, to = moved, u.edge
		}
		// Deleting the primary IPv4 address must not take the new one
		// (a secondary of the same subnet) with it.
		if err := b.edge.Sysctl("net.ipv4.conf."+c.path+".promote_secondaries", "1"); err != nil {
			return err
		}
		if err := ip(b.edge, addrArgs("add", to, c.path)...); err != nil {
			return err
		}
		return ip(b.edge, addrArgs("del", from, c.path)...)
	}
}

// allDown sets every edge uplink down (on) or up.
func allDown(on bool) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, _ *caseRun) error {
		for _, u := range faultUplinks {
			if err := b.edge.SetLinkUp(u.name, !on); err != nil {
				return err
			}
		}
		return nil
	}
}

// concStop signals the concentrator and waits for it to exit.
func concStop(sig syscall.Signal) func(context.Context, *faultBed, *caseRun) error {
	return func(_ context.Context, b *faultBed, c *caseRun) error {
		c.killed = time.Now()
		if err := b.concCmd.Process.Signal(sig); err != nil {
			return err
		}
		b.concCmd.Wait()
		c.exit = time.Since(c.killed)
		return nil
	}
}

// concRestart starts a new concentrator and notes when it listens.
func concRestart(ctx context.Context, b *faultBed, c *caseRun) error {
	if err := b.startConc(ctx); err != nil {
		return err
	}
	c.listening = time.Now()
	return nil
}

// garbageStart starts the hostile host's flood at the concentrator's
// listen port for the case's hold.
func garbageStart(ctx context.Context, b *faultBed, c *caseRun) error {
	conn, err := b.hostile.ListenUDP("0.0.0.0:0")
	if err != nil {
		return err
	}
	dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(faultsGarbageDst))
	c.garbageDone = make(chan struct{})
	go func() {
		defer close(c.garbageDone)
		defer conn.Close()
		c.garbageSent = sendGarbage(ctx, conn, dst, c.holdFor)
	}()
	return nil
}

// garbageWait waits for the flood to end.
func garbageWait(_ context.Context, _ *faultBed, c *caseRun) error {
	<-c.garbageDone
	return nil
}

// carrier returns the edge path that sent the most datagrams over a
// 300 ms window.
func (b *faultBed) carrier(ctx context.Context) (string, error) {
	st0, err := b.status(b.edgeSock)
	if err != nil {
		return "", err
	}
	if err := sleepUntil(ctx, time.Now().Add(300*time.Millisecond), nil); err != nil { // a measuring window
		return "", err
	}
	st1, err := b.status(b.edgeSock)
	if err != nil {
		return "", err
	}
	best, most := "", uint64(0)
	for _, p := range st1.Bonds[0].Paths {
		p0, _ := pathStats(st0, p.Name)
		if d := p.TxPackets - p0.TxPackets; best == "" || d > most {
			best, most = p.Name, d
		}
	}
	return best, nil
}

// preferSettle bounds how long a prefer-rules case waits for the preferred
// path to carry the probe before its fault.
const preferSettle = 5 * time.Second

// Drop reasons that explain a lost probe packet: the edge's on the send
// side, the concentrator's on the receive side.
var (
	edgeLossDrops = []tunnel.DropReason{tunnel.DropNoPath, tunnel.DropOversize, tunnel.DropQueueFull, tunnel.DropExpired,
		tunnel.DropDeadline, tunnel.DropTooLarge, tunnel.DropSendError, tunnel.DropObjectLost, tunnel.DropSuspect, tunnel.DropBlackHole}
	concLossDrops = []tunnel.DropReason{tunnel.DropBadHeader, tunnel.DropBadFEC, tunnel.DropSpoofed, tunnel.DropMalformed,
		tunnel.DropTUNWrite, tunnel.DropBadFlowTag, tunnel.DropReceiveQueueFull, tunnel.DropStale}
)

// dropTotals sums st's first bond's drops (bond and paths) of reasons.
func dropTotals(st *faultStatus, reasons []tunnel.DropReason) map[tunnel.DropReason]uint64 {
	m := map[tunnel.DropReason]uint64{}
	if st == nil || len(st.Bonds) == 0 {
		return m
	}
	bs := st.Bonds[0]
	for _, r := range reasons {
		m[r] += bs.Drops[r]
		for _, p := range bs.Paths {
			m[r] += p.Drops[r]
		}
	}
	return m
}

// fecRecovered is st's first bond's FEC-recovered packets.
func fecRecovered(st *faultStatus) uint64 {
	if st == nil || len(st.Bonds) == 0 || st.Bonds[0].FEC == nil {
		return 0
	}
	return st.Bonds[0].FEC.Recovered
}

// transportDropSum is the concentrator transport's drops over all reasons.
func transportDropSum(st *faultStatus) uint64 {
	var n uint64
	if st != nil {
		for _, v := range st.TransportDrops {
			n += v
		}
	}
	return n
}

// explain fills r's drop counters, Explained and Unexplained from the
// status before (e0, c0) and after (e1, c1) the case; c0 is nil when the
// concentrator restarted (its counters start at zero).
func explain(r *FaultResult, e0, e1, c0, c1 *faultStatus) {
	r.Drops = map[string]uint64{}
	var sum int64
	add := func(side string, a, b map[tunnel.DropReason]uint64) {
		for k, v := range b {
			if d := v - a[k]; v >= a[k] && d > 0 {
				r.Drops[side+":"+k.String()] = d
				sum += int64(d)
			}
		}
	}
	add("edge", dropTotals(e0, edgeLossDrops), dropTotals(e1, edgeLossDrops))
	add("conc", dropTotals(c0, concLossDrops), dropTotals(c1, concLossDrops))
	if rec := fecRecovered(c1) - fecRecovered(c0); fecRecovered(c1) >= fecRecovered(c0) && rec > 0 {
		r.Drops["conc:fec_recovered(-)"] = rec
		sum -= int64(rec)
	}
	if len(e1.Bonds) > 0 && len(e0.Bonds) > 0 {
		r.ICMPSent = e1.Bonds[0].ICMPSent - e0.Bonds[0].ICMPSent
	}
	r.Explained = sum
	r.Unexplained = int64(r.Lost) - sum
}

// runCase runs fc under rules and measures it. tag marks the case's
// probe packets, different for every case so that no late packet of one
// counts in the next.
func (b *faultBed) runCase(ctx context.Context, fc faultCase, rules string, tag uint32) (FaultResult, error) {
	r := FaultResult{Name: fc.name, Rules: rules, DetectMs: -1, RecoverMs: -1, HealMs: -1}
	if err := b.waitAllActive(ctx); err != nil {
		return r, err
	}
	rf := probeRules("")
	if rules == RulesPrefer {
		rf = probeRules(fc.preferPath)
	}
	if err := b.setRules(ctx, rf); err != nil {
		return r, err
	}
	e0, err := b.status(b.edgeSock)
	if err != nil {
		return r, err
	}
	c0, err := b.status(b.concSock)
	if err != nil {
		return r, err
	}
	size := fc.probeSize
	switch {
	case size == 0:
		size = faultsProbeSize
	case size == faultsProbeFull && e0.Bonds[0].MTU > 0:
		size = e0.Bonds[0].MTU - 28 // IPv4 and UDP headers
	case size == faultsProbeFull:
		size = 1252 // the default MTU's
	}
	p, err := startFaultProbe(b.edge, b.conc, netip.AddrPortFrom(netip.MustParseAddr(faultsProbeDst), faultsProbePort), size, tag)
	if err != nil {
		return r, err
	}
	defer p.close()
	if err := waitFor(ctx, 10*time.Second, "the probe to flow", func() bool { return p.received() >= 500 }); err != nil {
		return r, err
	}
	carrier, err := b.carrier(ctx)
	if err != nil {
		return r, err
	}
	// Under bondd's rate control a preferred path that sat idle through
	// the previous case starts again from a target that decayed with its
	// idle time, and climbs (doubling a report while the probe offers more);
	// until it holds the probe's rate the probe spills onto another path.
	// The case starts once the preferred path carries the probe, within
	// preferSettle.
	if rules == RulesPrefer && fc.path && fc.fixedPath == "" {
		for settle := time.Now().Add(preferSettle); carrier != fc.preferPath && time.Now().Before(settle); {
			if carrier, err = b.carrier(ctx); err != nil {
				return r, err
			}
		}
	}
	c := &caseRun{}
	switch {
	case fc.fixedPath != "":
		c.path = fc.fixedPath
	case fc.path && rules == RulesPrefer:
		c.path = fc.preferPath
	case fc.path:
		c.path = carrier
	}
	r.Path = c.path
	if rules == RulesPrefer && fc.path && carrier != c.path {
		r.Note = fmt.Sprintf("the rule prefers %s but %s carried the probe", c.path, carrier)
	}
	rttPath := c.path
	if rttPath == "" {
		rttPath = carrier
	}
	est, err := b.status(b.edgeSock)
	if err != nil {
		return r, err
	}
	ps, _ := pathStats(est, rttPath)
	r.RTTms = float64(ps.SmoothedRTT.Microseconds()) / 1000
	c.holdFor = fc.hold

	// The detection poller.
	det := make(chan time.Time, 1)
	pctx, pstop := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(pollDone)
		b.pollDetect(pctx, fc, c, est, c0, det)
	}()
	if err := fc.inject(ctx, b, c); err != nil {
		pstop()
		<-pollDone
		return r, fmt.Errorf("inject: %w", err)
	}
	if err := sleepUntil(ctx, t0.Add(fc.hold), nil); err != nil {
		pstop()
		<-pollDone
		return r, err
	}
	if fc.name == "mtu-blackhole" {
		if st, err := b.status(b.edgeSock); err == nil {
			ps, _ := pathStats(st, c.path)
			r.PMTUReason = ps.PMTUReason
		}
	}
	t1 := time.Now()
	if err := fc.heal(ctx, b, c); err != nil {
		pstop()
		<-pollDone
		return r, fmt.Errorf("heal: %w", err)
	}
	healAt := t1
	if !c.listening.IsZero() {
		healAt = c.listening
	}
	herr := b.waitAllActive(ctx)
	if herr == nil {
		r.HealMs = msOf(time.Since(healAt))
	}
	// Traffic after the heal: the probe flowing 1 s past the later of the
	// heal and every path ACTIVE.
	after := p.since(time.Now()) + time.Second
	if err := waitFor(ctx, 20*time.Second, "the probe to flow after the fault", func() bool { return p.lastArrival() >= after }); err != nil {
		pstop()
		<-pollDone
		return r, err
	}
	pstop()
	<-pollDone
	select {
	case d := <-det:
		r.DetectMs = msOf(d.Sub(t0))
	default:
	}
	p.stopSending()
	end := p.since(time.Now())
	// Drain: what is still queued or in flight has 1.5 s to arrive (the
	// receiver's stale limit is 1 s), and the counters to settle.
	if err := sleepUntil(ctx, time.Now().Add(1500*time.Millisecond), nil); err != nil {
		return r, err
	}
	if fc.name == "garbage" {
		// Every datagram of the flood counted, or 5 s passed.
		waitFor(ctx, 5*time.Second, "the garbage counted", func() bool {
			st, err := b.status(b.concSock)
			return err == nil && transportDropSum(st)-transportDropSum(c0) >= c.garbageSent
		})
	}
	e1, err := b.status(b.edgeSock)
	if err != nil {
		return r, err
	}
	c1, err := b.status(b.concSock)
	if err != nil {
		return r, err
	}
	sent, got := p.counts()
	r.Sent, r.Lost = uint64(sent), uint64(sent-got)
	pt0 := p.since(t0)
	r.GapMs = msOf(p.longestGap(pt0, end))
	r.GapFaultMs = msOf(p.longestGap(pt0, min(p.since(t1), end)))
	r.GapAfterHealMs = msOf(p.longestGapStarting(p.since(t1), end))
	from := pt0
	if fc.fromHeal {
		from = p.since(healAt)
	}
	r.RecoverMs = msOf(p.restoredAfter(from, end))
	r.LateMs = msOf(p.maxDelay())
	if !c.killed.IsZero() {
		r.ExitMs = msOf(c.exit)
		r.RestartMs = msOf(c.listening.Sub(c.killed))
		c0 = nil
	}
	if fc.name == "garbage" {
		r.GarbageSent = c.garbageSent
		r.GarbageCounted = transportDropSum(c1) - transportDropSum(c0)
		r.GarbageByReason = map[string]uint64{}
		var base map[string]uint64
		if c0 != nil {
			base = c0.TransportDrops
		}
		for k, v := range c1.TransportDrops {
			if v >= base[k] {
				r.GarbageByReason[k] = v - base[k]
			}
		}
	}
	explain(&r, e0, e1, c0, c1)
	r.Target, r.Pass = fc.target(&r)
	if herr != nil {
		r.Pass = false
		r.Note = strings.TrimPrefix(r.Note+"; "+herr.Error(), "; ")
	}
	return r, nil
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pollDetect polls the status every faultsStatusPoll until ctx ends and
// sends the time of the first poll that shows the fault on det: the
// faulted path not ACTIVE, turned SUSPECT, its datagram budget lowered
// or a black hole counted (path MTU discovery), or migrated (edge or
// concentrator view); for the whole bond any edge path not ACTIVE; for the
// garbage the concentrator's transport drops growing.
func (b *faultBed) pollDetect(ctx context.Context, fc faultCase, c *caseRun, e0, c0 *faultStatus, det chan<- time.Time) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	seen := false
	every(ctx, faultsStatusPoll, func() {
		now := time.Now()
		if !seen && b.faultSeen(fc, c, e0, c0) {
			seen = true // every may still tick once after stop
			det <- now
			stop()
		}
	})
}

// faultSeen reports whether the status now shows the fault (pollDetect
// says what counts), against e0 and c0, the edge's and concentrator's
// status before it.
func (b *faultBed) faultSeen(fc faultCase, c *caseRun, e0, c0 *faultStatus) bool {
	switch {
	case fc.name == "garbage":
		st, err := b.status(b.concSock)
		return err == nil && transportDropSum(st) > transportDropSum(c0)
	case c.path != "":
		if st, err := b.status(b.edgeSock); err == nil {
			p, _ := pathStats(st, c.path)
			p0, _ := pathStats(e0, c.path)
			if p.Status != "ACTIVE" || p.SuspectEvents > p0.SuspectEvents || p.Drops[tunnel.DropSuspect] > p0.Drops[tunnel.DropSuspect] ||
				p.BlackHoles > p0.BlackHoles || p.DatagramBudget < p0.DatagramBudget {
				return true
			}
		}
		if fc.name == "address-change" {
			if st, err := b.status(b.concSock); err == nil {
				p, _ := pathStats(st, c.path)
				p0, _ := pathStats(c0, c.path)
				return p.Migrations > p0.Migrations || (p.PeerAddr != "" && p.PeerAddr != p0.PeerAddr)
			}
		}
		return false
	default:
		st, err := b.status(b.edgeSock)
		return err == nil && !allActive(st)
	}
}
