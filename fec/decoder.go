package fec

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/klauspost/reedsolomon"
)

// The receive side, in the order a block lives:
//
//  1. The first packet of a block (data or parity) takes the next entry of
//     a ring of MaxBlocks entries; the entry it replaces, the oldest, is
//     evicted and its missing data counted lost if it was still open. A
//     per-class direct-mapped index finds the entry of a block id.
//  2. Each data packet is delivered by the caller at once; the decoder
//     marks its index delivered and keeps a copy (length prefix + bytes) in
//     a shard buffer. Each parity shard is kept likewise.
//  3. Once the block's real k is known (from a parity header) and any k of
//     its shards are in, the missing data packets are reconstructed, handed
//     to the caller and marked delivered; so are all data when k arrive.
//     The block is then done: its buffers go back to the free list, and its
//     entry remembers which indexes were delivered, so a late original of a
//     reconstructed packet is reported as a Duplicate.
//  4. A block still open Timeout after its first packet expires: its
//     missing data are counted lost, its buffers freed. Expiry runs on every
//     call, oldest block first, and from Expire.

// DecoderOptions configures a Decoder. The zero value is valid: each zero
// field takes its Default* constant.
type DecoderOptions struct {
	// MaxBlocks is the number of blocks tracked at once; when a new block
	// arrives the oldest is evicted. Default DefaultMaxBlocks. Block ids more
	// than MaxBlocks behind or ahead of a class's newest are outside the
	// window.
	MaxBlocks int
	// Timeout is how long a block may wait for its missing packets,
	// measured from its first packet; default DefaultTimeout. Change it with
	// SetTimeout as path RTTs move (e.g. a multiple of the largest RTT
	// spread, bounded).
	Timeout time.Duration
	// MaxK is the largest block size accepted, 1 … MaxK; default
	// DefaultMaxK. Blocks with a larger k are delivered unprotected.
	MaxK int
	// MaxPacketLen is the longest data packet kept, bytes, at most 65535;
	// default DefaultMaxPacketLen. Match the sender's.
	MaxPacketLen int
	// MaxBuffers bounds the shard buffers (MaxPacketLen+ShardOverhead bytes
	// each) held at once, at least 2·MaxK; default MaxBlocks×16 (at least
	// 2·MaxK). When they run out the oldest open block is evicted.
	MaxBuffers int
}

func (o DecoderOptions) withDefaults() DecoderOptions {
	if o.MaxBlocks == 0 {
		o.MaxBlocks = DefaultMaxBlocks
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxK == 0 {
		o.MaxK = DefaultMaxK
	}
	if o.MaxPacketLen == 0 {
		o.MaxPacketLen = DefaultMaxPacketLen
	}
	if o.MaxBuffers == 0 {
		o.MaxBuffers = min(max(o.MaxBlocks*16, 2*o.MaxK), math.MaxUint16)
	}
	return o
}

func (o DecoderOptions) validate() error {
	switch {
	case o.MaxBlocks < 1 || o.MaxBlocks > 1<<16:
		return fmt.Errorf("fec: MaxBlocks %d out of range 1…%d", o.MaxBlocks, 1<<16)
	case o.Timeout < 0:
		return fmt.Errorf("fec: negative Timeout %v", o.Timeout)
	case o.MaxK < 1 || o.MaxK > MaxK:
		return fmt.Errorf("fec: MaxK %d out of range 1…%d", o.MaxK, MaxK)
	case o.MaxPacketLen < 1 || o.MaxPacketLen > math.MaxUint16-ShardOverhead:
		return fmt.Errorf("fec: MaxPacketLen %d out of range 1…%d", o.MaxPacketLen, math.MaxUint16-ShardOverhead)
	case o.MaxBuffers < 2*o.MaxK || o.MaxBuffers > math.MaxUint16:
		return fmt.Errorf("fec: MaxBuffers %d out of range 2·MaxK (%d)…%d", o.MaxBuffers, 2*o.MaxK, math.MaxUint16)
	}
	return nil
}

// Verdict is what the decoder made of one packet.
type Verdict uint8

// Verdicts.
const (
	// Accept: a data packet is new, deliver it; a parity packet is kept.
	Accept Verdict = iota
	// Duplicate: this index of this block is already in, or was already
	// delivered (a late original of a reconstructed packet, or a parity
	// shard the block no longer needs). Drop it.
	Duplicate
	// Unprotected: the fields are possible but the decoder cannot track
	// the packet (class ≥ MaxClasses, k > MaxK, a data packet longer than
	// MaxPacketLen, a block outside the window). Deliver a data packet
	// anyway; a parity packet is dropped. Counted by reason.
	Unprotected
	// Bad: impossible fields, or fields that contradict earlier packets of
	// the block. Drop the packet. Counted by reason.
	Bad
)

// Deliver reports whether AddData's caller should deliver the packet.
func (v Verdict) Deliver() bool { return v == Accept || v == Unprotected }

var verdictNames = [...]string{"accept", "duplicate", "unprotected", "bad"}

// String returns a lower-case name for logs and metric labels.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Reason says why a packet was Unprotected or Bad, or why a reconstruction
// was discarded; a per-packet counter label, never an error.
type Reason uint8

// Reasons.
const (
	ReasonNone     Reason = iota
	ReasonClass           // class ≥ MaxClasses
	ReasonK               // k < 1 or > MaxK, r < 1 or > k
	ReasonIndex           // index outside the data (DATA) or parity (PARITY) part of its block
	ReasonLength          // packet longer than MaxPacketLen, MaxLen too large, or shard length ≠ MaxLen+ShardOverhead
	ReasonWindow          // block id more than MaxBlocks ahead of the class's newest
	ReasonStale           // block id more than MaxBlocks behind the class's newest
	ReasonMismatch        // k, r, MaxLen or a length that contradicts earlier packets of the block
	ReasonCorrupt         // a reconstructed length prefix larger than MaxLen: the inputs were inconsistent
	NumReasons
)

var reasonNames = [NumReasons]string{"", "class", "k", "index", "length", "window", "stale", "mismatch", "corrupt"}

// String returns a short lower-case name for use as a metric label ("" for
// ReasonNone).
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// DecoderStats are a Decoder's counters, for one class or summed over all.
type DecoderStats struct {
	Data             uint64 // data packets accepted (delivered on arrival)
	Parity           uint64 // parity shards accepted
	Recovered        uint64 // data packets reconstructed and handed out
	Lost             uint64 // data packets still missing when their block expired or was evicted (residual loss)
	Late             uint64 // data packets that arrived after their block expired (delivered, also in Lost)
	Duplicates       uint64 // packets with Verdict Duplicate
	RecoveredDropped uint64 // reconstructed packets the caller had no buffer for (also in Recovered)
	NoBuffer         uint64 // packets not kept for lack of a shard buffer
	BlocksComplete   uint64 // blocks whose data all arrived
	BlocksRecovered  uint64 // blocks completed by reconstruction
	BlocksExpired    uint64 // blocks that timed out with data missing
	BlocksEvicted    uint64 // open blocks pushed out by newer ones or by buffer pressure (missing data in Lost)
	Unprotected      uint64 // packets with Verdict Unprotected
	Bad              uint64 // packets with Verdict Bad, and discarded reconstructions
	Reasons          [NumReasons]uint64
}

// ResidualLoss returns Lost / (Data + Recovered + Lost), the fraction of
// data packets the receiver never got in time, or 0 before any.
func (s DecoderStats) ResidualLoss() float64 {
	n := s.Data + s.Recovered + s.Lost
	if n == 0 {
		return 0
	}
	return float64(s.Lost) / float64(n)
}

func (s *DecoderStats) add(t *DecoderStats) {
	s.Data += t.Data
	s.Parity += t.Parity
	s.Recovered += t.Recovered
	s.Lost += t.Lost
	s.Late += t.Late
	s.Duplicates += t.Duplicates
	s.RecoveredDropped += t.RecoveredDropped
	s.NoBuffer += t.NoBuffer
	s.BlocksComplete += t.BlocksComplete
	s.BlocksRecovered += t.BlocksRecovered
	s.BlocksExpired += t.BlocksExpired
	s.BlocksEvicted += t.BlocksEvicted
	s.Unprotected += t.Unprotected
	s.Bad += t.Bad
	for i := range s.Reasons {
		s.Reasons[i] += t.Reasons[i]
	}
}

// Recovered receives the data packets one AddData or AddParity call
// reconstructs, in the batch shape of tun.Device: packet i is written at
// Bufs[i][Offset:Offset+Sizes[i]]. Use one per calling goroutine; each call
// resets Sizes and Indexes. After a call the caller owns the filled buffers
// (Bufs[:len(Sizes)]) and should swap in fresh ones before the next call.
type Recovered struct {
	// Bufs are the caller's buffers, each with capacity ≥ Offset +
	// MaxPacketLen. Reconstructed packets beyond len(Bufs) are counted in
	// RecoveredDropped, so supply as many as the largest r in use.
	Bufs   [][]byte
	Offset int // where each packet starts in its buffer, bytes

	Sizes   []int // out: packet lengths, bytes
	Indexes []int // out: each packet's index in its block
	Ref     Ref   // out: the block (Class, Block, K, R, MaxLen) when len(Sizes) > 0
}

// Packet returns reconstructed packet i.
func (rc *Recovered) Packet(i int) []byte {
	return rc.Bufs[i][rc.Offset : rc.Offset+rc.Sizes[i]]
}

func (rc *Recovered) reset() {
	if rc != nil {
		rc.Sizes, rc.Indexes = rc.Sizes[:0], rc.Indexes[:0]
	}
}

// Entry states.
const (
	stFree    = iota
	stOpen    // collecting
	stDone    // every data packet delivered
	stExpired // timed out or evicted with data missing
)

// entry is one block in flight.
type entry struct {
	gen      uint64 // creation number; the entry is ents[gen%len(ents)]
	class    uint64
	block    uint64
	deadline int64 // ns since the decoder's epoch
	state    uint8
	kData    uint16 // target K from DATA headers, 0 until one arrives
	k, r     uint16 // from PARITY headers, 0 until one arrives
	maxLen   uint16
	nData    uint16    // data indexes delivered: arrived or reconstructed
	nStored  uint16    // data shards held
	nPar     uint16    // parity shards held
	top      uint16    // highest data index seen + 1
	slot     []uint16  // shard index → buffer id + 1; len 2·MaxK
	have     [4]uint64 // delivered data indexes; kept after the buffers are freed
}

func (e *entry) delivered(i int) bool { return e.have[i>>6]&(1<<(i&63)) != 0 }
func (e *entry) deliver(i int)        { e.have[i>>6] |= 1 << (i & 63); e.nData++ }

// classState is the window and counters of one FEC class.
type classState struct {
	seen   bool
	newest uint64   // highest block id seen in the window
	far    int      // consecutive far-ahead data packets
	index  []uint64 // block id & mask → entry gen + 1
	stats  DecoderStats
}

// resyncAfter is how many consecutive data packets from far ahead of the
// window move the window there (a long outage of a whole class).
const resyncAfter = 4

// Decoder is the receive side of one bond: a bounded table of the FEC
// blocks in flight. It is safe for concurrent use (one mutex), so every
// path's receive goroutine may call it. Memory is bounded by MaxBlocks
// entries and MaxBuffers shard buffers, allocated as first needed and then
// reused; nothing allocates per packet in steady state.
type Decoder struct {
	mu sync.Mutex
	// mu guards all following.
	o        DecoderOptions
	epoch    time.Time
	epochSet bool
	ents     []entry
	head     uint64 // entries created
	tail     uint64 // oldest entry not yet past expiry
	mask     uint64 // per-class index size - 1
	classes  [MaxClasses]*classState
	other    DecoderStats // bad packets with no valid class
	bufs     [][]byte     // shard buffers, by id
	free     []uint16     // ids of free buffers

	// scratch for reconstruction
	kernel  reedsolomon.Encoder // mulKernel()
	one     [1][]byte
	out     []byte // one shard
	mat     []byte // e×e system
	work    []byte // its inverse
	missing []int
	parIdx  []int
}

// NewDecoder returns a Decoder, or an error naming the bad option.
func NewDecoder(o DecoderOptions) (*Decoder, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	d := &Decoder{o: o, ents: make([]entry, o.MaxBlocks), kernel: mulKernel()}
	slots := make([]uint16, 2*o.MaxK*o.MaxBlocks)
	for i := range d.ents {
		d.ents[i].slot = slots[: 2*o.MaxK : 2*o.MaxK]
		slots = slots[2*o.MaxK:]
	}
	w := uint64(1)
	for w < 2*uint64(o.MaxBlocks)+1 {
		w <<= 1
	}
	d.mask = w - 1
	d.out = make([]byte, o.MaxPacketLen+ShardOverhead)
	d.mat = make([]byte, o.MaxK*o.MaxK)
	d.work = make([]byte, o.MaxK*o.MaxK)
	d.missing = make([]int, 0, o.MaxK)
	d.parIdx = make([]int, 0, o.MaxK)
	return d, nil
}

// SetTimeout changes the timeout of blocks that open from now on.
// timeout ≤ 0 means DefaultTimeout.
func (d *Decoder) SetTimeout(timeout time.Duration) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d.mu.Lock()
	d.o.Timeout = timeout
	d.mu.Unlock()
}

// Options returns the options in force, defaults applied.
func (d *Decoder) Options() DecoderOptions {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.o
}

// Stats returns the counters summed over all classes.
func (d *Decoder) Stats() DecoderStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.other
	for _, cs := range d.classes {
		if cs != nil {
			s.add(&cs.stats)
		}
	}
	return s
}

// ClassStats returns the counters of one class (zero for an unknown one).
func (d *Decoder) ClassStats(class uint64) DecoderStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	if class < MaxClasses && d.classes[class] != nil {
		return d.classes[class].stats
	}
	return DecoderStats{}
}

// Expire times out every block whose timeout has passed at now, counting
// its missing data as lost and freeing its buffers. AddData and AddParity
// do this too; call Expire from a ticker so losses are counted and memory
// returned while no packets arrive.
func (d *Decoder) Expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.mono(now))
}

// Reset forgets every block and window (a new session of the peer), keeping
// the counters and buffers.
func (d *Decoder) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.ents {
		e := &d.ents[i]
		if e.state == stOpen {
			d.releaseLocked(e)
		}
		e.state = stFree
	}
	for _, cs := range d.classes {
		if cs != nil {
			cs.seen, cs.far = false, 0
			clear(cs.index)
		}
	}
	d.tail = d.head
}

// AddData records a DATA packet that the caller delivers at once (unless
// the verdict says otherwise, see Verdict.Deliver). The decoder copies pkt
// and keeps no reference to it. If the packet completes what a block needs,
// the block's missing packets are reconstructed into rec (which may be nil
// to drop them). ref carries the header's Class, Block, Index and K; R and
// MaxLen are ignored. AddData never panics and allocates nothing in steady
// state.
func (d *Decoder) AddData(now time.Time, ref Ref, pkt []byte, rec *Recovered) Verdict {
	rec.reset()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.mono(now)
	d.expireLocked(t)
	if ref.Class >= MaxClasses {
		return d.rejectLocked(nil, Unprotected, ReasonClass)
	}
	cs := d.classLocked(ref.Class)
	switch {
	case ref.K < 1 || ref.Index < 0 || ref.Index >= ref.K:
		return d.rejectLocked(cs, Bad, ReasonIndex)
	case ref.K > d.o.MaxK:
		return d.rejectLocked(cs, Unprotected, ReasonK)
	case len(pkt) > d.o.MaxPacketLen:
		return d.rejectLocked(cs, Unprotected, ReasonLength)
	}
	e := d.lookupLocked(cs, ref.Class, ref.Block)
	if e == nil {
		if why := d.windowLocked(cs, ref.Block, true); why != ReasonNone {
			return d.rejectLocked(cs, Unprotected, why)
		}
		e = d.createLocked(cs, ref.Class, ref.Block, t)
	}
	i := ref.Index
	if e.kData != 0 && ref.K != int(e.kData) || e.k != 0 && (i >= int(e.k) || len(pkt) > int(e.maxLen)) {
		return d.rejectLocked(cs, Bad, ReasonMismatch)
	}
	if e.delivered(i) {
		cs.stats.Duplicates++
		return Duplicate
	}
	e.kData = uint16(ref.K)
	e.deliver(i)
	e.top = max(e.top, uint16(i+1))
	if e.state != stOpen { // expired: the packet was counted lost
		cs.stats.Late++
		return Accept
	}
	cs.stats.Data++
	if id, ok := d.bufferLocked(e); ok {
		b := d.bufs[id]
		putPrefix(b, len(pkt))
		copy(b[ShardOverhead:], pkt)
		e.slot[i] = id + 1
		e.nStored++
	} else {
		cs.stats.NoBuffer++
	}
	d.progressLocked(cs, e, rec)
	return Accept
}

// AddParity records a PARITY shard. ref carries the header's Class, Block,
// Index, K, R and MaxLen; len(shard) must be MaxLen+ShardOverhead. If the
// block now has any K of its K+R shards, its missing data packets are
// reconstructed into rec (nil drops them). The decoder copies shard and
// keeps no reference. Only Accept means the shard was kept. AddParity never
// panics and allocates nothing in steady state.
func (d *Decoder) AddParity(now time.Time, ref Ref, shard []byte, rec *Recovered) Verdict {
	rec.reset()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.mono(now)
	d.expireLocked(t)
	if ref.Class >= MaxClasses {
		return d.rejectLocked(nil, Unprotected, ReasonClass)
	}
	cs := d.classLocked(ref.Class)
	switch {
	case ref.K < 1 || ref.R < 1 || ref.R > ref.K:
		return d.rejectLocked(cs, Bad, ReasonK)
	case ref.K > d.o.MaxK:
		return d.rejectLocked(cs, Unprotected, ReasonK)
	case ref.Index < ref.K || ref.Index >= ref.K+ref.R:
		return d.rejectLocked(cs, Bad, ReasonIndex)
	case ref.MaxLen < 0 || ref.MaxLen > d.o.MaxPacketLen:
		return d.rejectLocked(cs, Unprotected, ReasonLength)
	case len(shard) != ref.MaxLen+ShardOverhead:
		return d.rejectLocked(cs, Bad, ReasonLength)
	}
	e := d.lookupLocked(cs, ref.Class, ref.Block)
	if e == nil {
		if why := d.windowLocked(cs, ref.Block, false); why != ReasonNone {
			v := Unprotected
			if why == ReasonWindow {
				v = Bad
			}
			return d.rejectLocked(cs, v, why)
		}
		e = d.createLocked(cs, ref.Class, ref.Block, t)
	}
	if e.k == 0 {
		if e.kData != 0 && ref.K > int(e.kData) || int(e.top) > ref.K || !d.lengthsFitLocked(e, ref.MaxLen) {
			return d.rejectLocked(cs, Bad, ReasonMismatch)
		}
	} else if ref.K != int(e.k) || ref.R != int(e.r) || ref.MaxLen != int(e.maxLen) {
		return d.rejectLocked(cs, Bad, ReasonMismatch)
	}
	if e.state != stOpen || e.slot[ref.Index] != 0 {
		cs.stats.Duplicates++
		return Duplicate
	}
	e.k, e.r, e.maxLen = uint16(ref.K), uint16(ref.R), uint16(ref.MaxLen)
	if int(e.nData) >= ref.K { // the real k shows the block was complete
		d.finishLocked(cs, e)
		cs.stats.Duplicates++
		return Duplicate
	}
	cs.stats.Parity++
	id, ok := d.bufferLocked(e)
	if !ok {
		cs.stats.NoBuffer++
		return Accept
	}
	copy(d.bufs[id], shard)
	e.slot[ref.Index] = id + 1
	e.nPar++
	d.progressLocked(cs, e, rec)
	return Accept
}

// rejectLocked counts a packet the decoder will not track.
func (d *Decoder) rejectLocked(cs *classState, v Verdict, why Reason) Verdict {
	s := &d.other
	if cs != nil {
		s = &cs.stats
	}
	if v == Bad {
		s.Bad++
	} else {
		s.Unprotected++
	}
	s.Reasons[why]++
	return v
}

// mono converts now to ns since the decoder's first call (monotonic when
// now carries a monotonic reading).
func (d *Decoder) mono(now time.Time) int64 {
	if !d.epochSet {
		d.epoch, d.epochSet = now, true
	}
	return int64(now.Sub(d.epoch))
}

func (d *Decoder) classLocked(class uint64) *classState {
	cs := d.classes[class]
	if cs == nil { // once per class
		cs = &classState{index: make([]uint64, d.mask+1)}
		d.classes[class] = cs
	}
	return cs
}

// lookupLocked returns the entry of (class, block), or nil.
func (d *Decoder) lookupLocked(cs *classState, class, block uint64) *entry {
	g := cs.index[block&d.mask]
	if g == 0 {
		return nil
	}
	e := &d.ents[(g-1)%uint64(len(d.ents))]
	if e.gen != g-1 || e.state == stFree || e.class != class || e.block != block {
		return nil
	}
	return e
}

// windowLocked checks a block id not in the table against the class's
// window, moving the window forward, and returns why it is outside.
func (d *Decoder) windowLocked(cs *classState, block uint64, data bool) Reason {
	if !cs.seen {
		cs.seen, cs.newest = true, block
		return ReasonNone
	}
	w := int64(d.o.MaxBlocks)
	switch diff := int64(block - cs.newest); {
	case diff > w:
		if !data {
			return ReasonWindow
		}
		if cs.far++; cs.far < resyncAfter {
			return ReasonWindow
		}
		cs.newest, cs.far = block, 0
	case diff > 0:
		cs.newest, cs.far = block, 0
	case diff <= -w:
		return ReasonStale
	default:
		cs.far = 0
	}
	return ReasonNone
}

// createLocked opens an entry for (class, block), evicting the oldest
// entry if it is still open.
func (d *Decoder) createLocked(cs *classState, class, block uint64, t int64) *entry {
	if g := cs.index[block&d.mask]; g != 0 { // an older block of this class at the same index
		if old := &d.ents[(g-1)%uint64(len(d.ents))]; old.gen == g-1 && old.state == stOpen {
			d.evictLocked(old)
		}
	}
	e := &d.ents[d.head%uint64(len(d.ents))]
	if e.state != stFree {
		if e.state == stOpen {
			d.evictLocked(e)
		}
		if ocs := d.classes[e.class]; ocs.index[e.block&d.mask] == e.gen+1 {
			ocs.index[e.block&d.mask] = 0
		}
	}
	slot := e.slot
	*e = entry{gen: d.head, class: class, block: block, deadline: t + int64(d.o.Timeout), state: stOpen, slot: slot}
	d.head++
	cs.index[block&d.mask] = e.gen + 1
	return e
}

// expireLocked closes the open entries whose deadline has passed, oldest
// first, stopping at the first that has not.
func (d *Decoder) expireLocked(t int64) {
	n := uint64(len(d.ents))
	if d.head-d.tail > n {
		d.tail = d.head - n
	}
	for ; d.tail < d.head; d.tail++ {
		e := &d.ents[d.tail%n]
		if e.state != stOpen {
			continue
		}
		if e.deadline > t {
			return
		}
		d.closeLocked(e, false)
	}
}

// evictLocked closes an open entry before its deadline.
func (d *Decoder) evictLocked(e *entry) { d.closeLocked(e, true) }

// closeLocked ends an open entry that is not done: what is missing of its
// data (of the real k when a parity header told it, else below the highest
// index seen) is lost.
func (d *Decoder) closeLocked(e *entry, evicted bool) {
	cs := d.classes[e.class]
	k := int(e.top)
	if e.k != 0 {
		k = int(e.k)
	}
	lost := uint64(max(0, k-int(e.nData)))
	cs.stats.Lost += lost
	switch {
	case evicted:
		cs.stats.BlocksEvicted++
	case lost == 0: // e.g. closed by its time budget, without parity
		cs.stats.BlocksComplete++
	default:
		cs.stats.BlocksExpired++
	}
	d.releaseLocked(e)
	e.state = stExpired
}

// finishLocked ends an entry whose data have all been delivered.
func (d *Decoder) finishLocked(cs *classState, e *entry) {
	cs.stats.BlocksComplete++
	d.releaseLocked(e)
	e.state = stDone
}

// releaseLocked returns an entry's buffers to the free list.
func (d *Decoder) releaseLocked(e *entry) {
	for i, id := range e.slot {
		if id != 0 {
			d.free = append(d.free, id-1)
			e.slot[i] = 0
		}
	}
	e.nStored, e.nPar = 0, 0
}

// bufferLocked returns a free shard buffer for e, allocating one while
// under MaxBuffers, else evicting the oldest other open entry.
func (d *Decoder) bufferLocked(e *entry) (uint16, bool) {
	if len(d.free) == 0 && len(d.bufs) < d.o.MaxBuffers {
		d.bufs = append(d.bufs, make([]byte, d.o.MaxPacketLen+ShardOverhead)) // warm-up only
		d.free = append(d.free, uint16(len(d.bufs)-1))
	}
	if len(d.free) == 0 {
		n := uint64(len(d.ents))
		for g := d.tail; g < d.head && len(d.free) == 0; g++ {
			o := &d.ents[g%n]
			if o != e && o.state == stOpen && o.nStored+o.nPar > 0 {
				d.evictLocked(o)
			}
		}
		if len(d.free) == 0 {
			return 0, false
		}
	}
	id := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	return id, true
}

// lengthsFitLocked reports whether every data packet e holds is at most
// maxLen bytes.
func (d *Decoder) lengthsFitLocked(e *entry, maxLen int) bool {
	for i := range int(e.top) {
		if id := e.slot[i]; id != 0 && prefix(d.bufs[id-1]) > maxLen {
			return false
		}
	}
	return true
}

// progressLocked finishes e if all its data are delivered, else
// reconstructs when enough shards are in.
func (d *Decoder) progressLocked(cs *classState, e *entry, rec *Recovered) {
	k := int(e.k)
	if k == 0 {
		if e.nData == e.kData {
			d.finishLocked(cs, e)
		}
		return
	}
	if int(e.nData) >= k {
		d.finishLocked(cs, e)
		return
	}
	if int(e.nStored)+int(e.nPar) < k {
		return
	}
	d.reconstructLocked(cs, e, rec)
	if int(e.nData) >= k {
		cs.stats.BlocksRecovered++
		d.releaseLocked(e)
		e.state = stDone
	} else { // a corrupt reconstruction: give up on the rest
		d.closeLocked(e, false)
	}
}

// reconstructLocked solves for the data shards e does not hold and hands
// out those not yet delivered. e holds at least k shards.
//
// With A the parity rows of the code, the e missing data D_m satisfy, for
// any e held parity shards P_j:
//
//	P_j = Σ_{i held} A[j][i]·D_i + Σ_{m missing} A[j][m]·D_m
//
// so D_m = Σ_a B⁻¹[m][a]·(P_{j_a} + Σ_{i held} A[j_a][i]·D_i) with B the
// e×e matrix A[j_a][m], which is invertible because the code is MDS. Each
// D_m is accumulated in one pass over the held shards.
func (d *Decoder) reconstructLocked(cs *classState, e *entry, rec *Recovered) {
	k, maxLen := int(e.k), int(e.maxLen)
	shardLen := maxLen + ShardOverhead
	a, err := parityMatrix(k)
	if err != nil {
		return
	}
	miss := d.missing[:0]
	for i := range k {
		if e.slot[i] == 0 {
			miss = append(miss, i)
		} else { // zero-pad the held data to the shard length
			b := d.bufs[e.slot[i]-1]
			clear(b[ShardOverhead+prefix(b) : shardLen])
		}
	}
	ne := len(miss)
	par := d.parIdx[:0]
	for j := k; j < k+int(e.r) && len(par) < ne; j++ {
		if e.slot[j] != 0 {
			par = append(par, j)
		}
	}
	if len(par) < ne {
		return
	}
	b := d.mat[:ne*ne]
	for ai, j := range par {
		for c, m := range miss {
			b[ai*ne+c] = a[(j-k)*k+m]
		}
	}
	if !gfInvert(b, ne, d.work) {
		cs.stats.Bad++
		cs.stats.Reasons[ReasonCorrupt]++
		return
	}
	if rec != nil {
		rec.Ref = Ref{Class: e.class, Block: e.block, K: k, R: int(e.r), MaxLen: maxLen}
	}
	one := d.one[:]
	out := d.out[:shardLen]
	for c, m := range miss {
		if e.delivered(m) { // arrived but was not kept for lack of a buffer
			continue
		}
		inv := b[c*ne : c*ne+ne]
		clear(out)
		for i := range k {
			if e.slot[i] == 0 {
				continue
			}
			var coef byte
			for ai, j := range par {
				coef ^= gfMul(inv[ai], a[(j-k)*k+i])
			}
			mulAdd(d.kernel, coef, d.bufs[e.slot[i]-1][:shardLen], out, one)
		}
		for ai, j := range par {
			mulAdd(d.kernel, inv[ai], d.bufs[e.slot[j]-1][:shardLen], out, one)
		}
		n := prefix(out)
		if n > maxLen {
			cs.stats.Bad++
			cs.stats.Reasons[ReasonCorrupt]++
			continue
		}
		e.deliver(m)
		cs.stats.Recovered++
		if rec == nil || rec.Offset < 0 || len(rec.Sizes) >= len(rec.Bufs) || cap(rec.Bufs[len(rec.Sizes)]) < rec.Offset+n {
			cs.stats.RecoveredDropped++
			continue
		}
		x := len(rec.Sizes)
		copy(rec.Bufs[x][rec.Offset:rec.Offset+n], out[ShardOverhead:ShardOverhead+n])
		rec.Sizes = append(rec.Sizes, n)
		rec.Indexes = append(rec.Indexes, m)
	}
}
