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
//     reconstructed packet is reported as a Duplicate, and counted in
//     DecoderStats.Masked with how much earlier the reconstruction was
//     (masking.go).
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
	now      int64 // the current call's clock, ns since epoch (set by enterLocked)
	lag      int64 // ParityLag, ns
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
	d := &Decoder{o: o, kernel: mulKernel()}
	w := uint64(1)
	for w < 2*uint64(o.MaxBlocks)+1 {
		w <<= 1
	}
	d.mask = w - 1
	return d, nil
}

// allocLocked allocates the block table and the reconstruction scratch,
// once, when the first block opens: a decoder that never sees an FEC
// packet (an idle bond) holds none of it.
func (d *Decoder) allocLocked() {
	o := d.o
	d.ents = make([]entry, o.MaxBlocks)
	slots := make([]uint16, 2*o.MaxK*o.MaxBlocks)
	for i := range d.ents {
		d.ents[i].slot = slots[: 2*o.MaxK : 2*o.MaxK]
		slots = slots[2*o.MaxK:]
	}
	d.out = make([]byte, o.MaxPacketLen+ShardOverhead)
	d.mat = make([]byte, o.MaxK*o.MaxK)
	d.work = make([]byte, o.MaxK*o.MaxK)
	d.missing = make([]int, 0, o.MaxK)
	d.parIdx = make([]int, 0, o.MaxK)
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

// ParityLag returns how long after a block's first packet its parity has
// been arriving: the largest lag seen, decaying towards smaller ones by
// 1/16 of the difference per parity packet. A sender whose block budget
// is longer than the receiver's Timeout shows here (its parity arrives
// after the block expired); set the timeout above it (tunnel does).
func (d *Decoder) ParityLag() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return time.Duration(d.lag)
}

// parityLagLocked folds one parity packet's lag (ns) into ParityLag.
func (d *Decoder) parityLagLocked(lag int64) {
	if lag >= d.lag {
		d.lag = lag
	} else {
		d.lag -= (d.lag - lag) / 16
	}
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
	t, cs, v := d.enterLocked(now, ref.Class)
	if cs == nil {
		return v
	}
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
		if e.takeRebuilt(i) { // the original of a reconstructed packet: delay masked
			cs.stats.Masked.add(t - e.rebuiltT)
		}
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
	t, cs, v := d.enterLocked(now, ref.Class)
	if cs == nil {
		return v
	}
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
	if e != nil {
		d.parityLagLocked(t - e.opened)
	}
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

// enterLocked begins AddData and AddParity: it returns now as the decoder's
// clock t after expiring the blocks past their time, and the state of
// class; or a nil cs and the verdict for a class beyond MaxClasses.
func (d *Decoder) enterLocked(now time.Time, class uint64) (t int64, cs *classState, v Verdict) {
	t = d.mono(now)
	d.now = t
	d.expireLocked(t)
	if class >= MaxClasses {
		return t, nil, d.rejectLocked(nil, Unprotected, ReasonClass)
	}
	return t, d.classLocked(class), Accept
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
