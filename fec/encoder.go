package fec

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/klauspost/reedsolomon"
)

// The send side, in the order a block lives:
//
//  1. Add: the first packet opens a block and starts its time budget. Each
//     packet is copied (length prefix + bytes) into the encoder's slot for
//     its index and counted on its path; the caller sends it at once.
//  2. The block closes when it holds K packets (Add reports full and the
//     caller calls Seal) or when its budget runs out (the caller's timer
//     calls Flush), whichever comes first; Seal on a partial block closes it
//     early.
//  3. Closing picks r from the Redundancy (ParityCount over the block's
//     per-path counts), zero-pads the copies to the block's longest packet
//     and writes r parity shards into the caller's buffers. The slots are
//     then reused by the next block.

// EncoderOptions configures one Encoder. The zero value is valid: each zero
// field takes its Default* constant.
type EncoderOptions struct {
	// Class is the FEC class written into every Ref; optional, default 0.
	// A Decoder tracks classes below MaxClasses.
	Class uint64
	// K is the block size, data packets, 1 … MaxK; default DefaultK.
	K int
	// Budget is the longest a block stays open, measured from its first
	// packet; default DefaultBudget (30 ms). Enforced by the caller's calls
	// to Flush, which Deadline schedules.
	Budget time.Duration
	// MaxPacketLen is the longest packet protected, bytes, at most 65535;
	// default DefaultMaxPacketLen. Longer packets are refused by Add and go
	// out without FEC.
	MaxPacketLen int
	// MaxR caps the parity shards per block, 1 … K; default K.
	MaxR int
}

func (o EncoderOptions) withDefaults() EncoderOptions {
	if o.K == 0 {
		o.K = DefaultK
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.MaxPacketLen == 0 {
		o.MaxPacketLen = DefaultMaxPacketLen
	}
	if o.MaxR == 0 {
		o.MaxR = o.K
	}
	return o
}

func (o EncoderOptions) validate() error {
	switch {
	case o.K < 1 || o.K > MaxK:
		return fmt.Errorf("fec: K %d out of range 1…%d", o.K, MaxK)
	case o.Budget < 0:
		return fmt.Errorf("fec: negative Budget %v", o.Budget)
	case o.MaxPacketLen < 1 || o.MaxPacketLen > math.MaxUint16:
		return fmt.Errorf("fec: MaxPacketLen %d out of range 1…%d", o.MaxPacketLen, math.MaxUint16)
	case o.MaxR < 1 || o.MaxR > o.K:
		return fmt.Errorf("fec: MaxR %d out of range 1…K (%d)", o.MaxR, o.K)
	}
	return nil
}

// Redundancy decides r when a block closes. The zero value gives no parity.
type Redundancy struct {
	// Loss is the loss rate p_i of each path index i, as passed to Add
	// (from LossIntervals.Rate); paths past its end count as lossless.
	Loss []float64
	// Alpha is the safety factor α; 0 means DefaultAlpha.
	Alpha float64
	// Ratio, when > 0, fixes r = ⌈Ratio·k⌉ (capped at k) for "fixed"
	// FEC and ignores Loss and Alpha.
	Ratio float64
	// Residual, when in (0, 1), is the highest probability with which a
	// block that holds an assured packet (AddAssured) may fail to rebuild
	// its data: such a block gets at least AssuredParity(k, L̂/k,
	// Residual) parity packets, L̂ the block's expected loss
	// (ExpectedLoss) over AssuredLoss. 0 adds nothing to r.
	Residual float64
	// AssuredLoss, when not nil, are the loss rates of the paths for the
	// Residual bound, in place of Loss: rates that do not take a path
	// that has lost nothing yet for lossless (LossIntervals.UpperRate).
	AssuredLoss []float64
}

// count returns r for a block of k packets with per-path counts kPerPath;
// assured: the block holds an assured packet.
func (rd *Redundancy) count(k int, kPerPath []int, assured bool) int {
	if rd == nil {
		return 0
	}
	if rd.Ratio > 0 {
		return min(k, ceilCount(rd.Ratio*float64(k)))
	}
	r := ParityCount(k, kPerPath, rd.Loss, rd.Alpha)
	if assured && rd.Residual > 0 && k > 0 {
		loss := rd.AssuredLoss
		if loss == nil {
			loss = rd.Loss
		}
		r = max(r, AssuredParity(k, ExpectedLoss(kPerPath, loss)/float64(k), rd.Residual))
	}
	return r
}

// Parity receives a closed block's parity shards. The caller supplies Bufs
// and reads the rest; one Parity per goroutine that seals (the sender and
// the budget timer), reused across blocks.
type Parity struct {
	// Bufs are the caller's buffers, one per parity shard it can send (at
	// least MaxR for the full r), each with capacity ≥ MaxPacketLen +
	// ShardOverhead; shard j is written to Bufs[j][:MaxLen+ShardOverhead].
	// r is capped at the number of leading buffers that are large enough.
	Bufs [][]byte

	// Ref describes the block: Class, Block, K (its real data count), R,
	// MaxLen. Shard j's own Ref is ShardRef(j).
	Ref Ref
	// Shards are the R parity shards, Bufs[j][:Ref.MaxLen+ShardOverhead].
	// Valid until the caller reuses Bufs.
	Shards [][]byte
	// KPerPath[i] is the number of the block's data packets on path i,
	// trimmed after the last non-zero entry.
	KPerPath []int
	// ByTimer reports that the time budget closed the block.
	ByTimer bool
}

// ShardRef returns the Ref of parity shard j: Ref with Index K+j.
func (p *Parity) ShardRef(j int) Ref {
	r := p.Ref
	r.Index = r.K + j
	return r
}

// EncoderStats are an Encoder's counters since it was created.
type EncoderStats struct {
	Blocks        uint64 // blocks closed
	BlocksByK     uint64 // closed full, by Seal or Flush
	BlocksByTimer uint64 // closed by Flush at the time budget, not full
	BlocksForced  uint64 // closed by Seal before full
	BlocksUnseal  uint64 // full blocks the next Add had to close without parity (Seal not called)
	Data          uint64 // data packets protected
	Parity        uint64 // parity shards produced
	Unprotected   uint64 // packets Add refused (too long, or a bad path index)
	ParityCapped  uint64 // blocks whose r was cut by MaxR or by too few or too small Bufs
}

// CodingRate returns k/(k+r) over all closed blocks, Data/(Data+Parity), or
// 1 before any.
func (s EncoderStats) CodingRate() float64 {
	if s.Data+s.Parity == 0 {
		return 1
	}
	return float64(s.Data) / float64(s.Data+s.Parity)
}

// Encoder assembles the blocks of one FEC class. It is safe for concurrent
// use (one mutex): the sender calls Add and Seal, a timer calls Flush. It
// holds K slot buffers of MaxPacketLen+ShardOverhead bytes and allocates
// nothing after the first block of each (k, r).
type Encoder struct {
	mu sync.Mutex
	// mu guards all following.
	o       EncoderOptions
	block   uint64    // id of the open block
	n       int       // packets in the open block
	opened  time.Time // time of its first packet
	maxLen  int       // its longest packet
	slots   [][]byte  // K copies: length prefix + packet; cap MaxPacketLen+ShardOverhead
	perPath [MaxPaths]int
	assured bool // the open block holds a packet added by AddAssured
	last    struct {
		k, r int
		enc  reedsolomon.Encoder
	}
	stats EncoderStats
}

// NewEncoder returns an Encoder for one FEC class, or an error naming the
// bad option.
func NewEncoder(o EncoderOptions) (*Encoder, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Encoder{o: o}, nil
}

// allocLocked allocates the block's K slots, once, with the first packet:
// an encoder that never sends (an idle bond) holds none.
func (e *Encoder) allocLocked() {
	e.slots = make([][]byte, e.o.K)
	buf := make([]byte, e.o.K*(e.o.MaxPacketLen+ShardOverhead))
	for i := range e.slots {
		e.slots[i] = buf[: 0 : e.o.MaxPacketLen+ShardOverhead]
		buf = buf[e.o.MaxPacketLen+ShardOverhead:]
	}
}

// Options returns the options in force, defaults applied.
func (e *Encoder) Options() EncoderOptions { return e.o }

// Add puts pkt into the open block, opening one at now if there is none,
// and returns its Ref (Block, Index, target K) for the DATA header. The
// caller sends pkt at once; Add copies it and keeps no reference. path is
// the index of the path the packet goes out on, 0 ≤ path < MaxPaths, the i
// of k_i.
//
// full reports that the block now holds K packets: call Seal(ref.Block, …)
// next. ok is false, and pkt must go out without FEC fields, when pkt is
// longer than MaxPacketLen or path is out of range. Add does not allocate.
func (e *Encoder) Add(now time.Time, pkt []byte, path int) (ref Ref, full, ok bool) {
	return e.add(now, pkt, path, false)
}

// AddAssured is Add for a packet whose loss costs more than itself (a
// video packet whose loss breaks the frames that follow it until the next
// keyframe): the block it joins gets at least the parity that
// Redundancy.Residual asks for.
func (e *Encoder) AddAssured(now time.Time, pkt []byte, path int) (ref Ref, full, ok bool) {
	return e.add(now, pkt, path, true)
}

func (e *Encoder) add(now time.Time, pkt []byte, path int, assured bool) (ref Ref, full, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(pkt) > e.o.MaxPacketLen || path < 0 || path >= MaxPaths {
		e.stats.Unprotected++
		return Ref{}, false, false
	}
	if e.n == e.o.K { // full but never sealed
		e.stats.BlocksUnseal++
		e.sealLocked(nil, nil, false)
	}
	if e.n == 0 {
		e.opened = now
	}
	if e.slots == nil { // once: the first packet
		e.allocLocked()
	}
	s := e.slots[e.n][:ShardOverhead+len(pkt)]
	putPrefix(s, len(pkt))
	copy(s[ShardOverhead:], pkt)
	e.slots[e.n] = s
	e.maxLen = max(e.maxLen, len(pkt))
	e.perPath[path]++
	e.assured = e.assured || assured
	ref = Ref{Class: e.o.Class, Block: e.block, Index: e.n, K: e.o.K}
	e.n++
	return ref, e.n == e.o.K, true
}

// Seal closes block if it is the open block and holds at least one packet,
// writes its parity into p (r from rd), and reports whether it did. It
// returns false when block was already closed, e.g. by Flush on the timer
// goroutine, in which case that call produced the parity. Sealing a block
// that is not full closes it early. Seal does not allocate once the (k, r)
// encoder exists and p.Shards and p.KPerPath have grown.
func (e *Encoder) Seal(block uint64, rd *Redundancy, p *Parity) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 || block != e.block {
		return false
	}
	e.sealLocked(rd, p, false)
	return true
}

// Flush closes the open block if it is full or its time budget has run out
// at now, writes its parity into p as Seal does, and reports whether it
// closed one. Call it at Deadline.
func (e *Encoder) Flush(now time.Time, rd *Redundancy, p *Parity) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 || e.n < e.o.K && now.Sub(e.opened) < e.o.Budget {
		return false
	}
	e.sealLocked(rd, p, e.n < e.o.K)
	return true
}

// Deadline returns when the open block's time budget runs out, and false if
// no block is open.
func (e *Encoder) Deadline() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		return time.Time{}, false
	}
	return e.opened.Add(e.o.Budget), true
}

// Stats returns a snapshot of the counters.
func (e *Encoder) Stats() EncoderStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// sealLocked closes the open block (n ≥ 1) and starts the next. p == nil
// closes it without parity.
func (e *Encoder) sealLocked(rd *Redundancy, p *Parity, byTimer bool) {
	k := e.n
	top := 0
	for i, c := range e.perPath {
		if c != 0 {
			top = i + 1
		}
	}
	r := rd.count(k, e.perPath[:top], e.assured)
	shardLen := e.maxLen + ShardOverhead
	if p != nil {
		p.KPerPath = append(p.KPerPath[:0], e.perPath[:top]...)
		p.ByTimer = byTimer
		p.Shards = p.Shards[:0]
		want := r
		r = min(r, e.o.MaxR)
		for j := range r {
			if j >= len(p.Bufs) || cap(p.Bufs[j]) < shardLen {
				r = j
				break
			}
		}
		if r < want {
			e.stats.ParityCapped++
		}
		if r > 0 && !e.encodeLocked(k, r, shardLen, p) {
			r = 0
			p.Shards = p.Shards[:0]
		}
		p.Ref = Ref{Class: e.o.Class, Block: e.block, K: k, R: r, MaxLen: e.maxLen}
	} else {
		r = 0
	}

	e.stats.Blocks++
	switch {
	case k == e.o.K:
		e.stats.BlocksByK++
	case byTimer:
		e.stats.BlocksByTimer++
	default:
		e.stats.BlocksForced++
	}
	e.stats.Data += uint64(k)
	e.stats.Parity += uint64(r)

	e.block++
	e.n, e.maxLen, e.assured = 0, 0, false
	e.perPath = [MaxPaths]int{}
}

// encodeLocked writes r parity shards of shardLen bytes for the k slots
// into p.Shards.
func (e *Encoder) encodeLocked(k, r, shardLen int, p *Parity) bool {
	if e.last.enc == nil || e.last.k != k || e.last.r != r {
		enc, err := encoderFor(k, r)
		if err != nil {
			return false
		}
		e.last.k, e.last.r, e.last.enc = k, r, enc
	}
	for j := range r {
		s := p.Bufs[j][:shardLen]
		clear(s)
		p.Shards = append(p.Shards, s)
	}
	for i := range k {
		s := e.slots[i]
		d := s[:shardLen]
		clear(d[len(s):])
		if err := e.last.enc.EncodeIdx(d, i, p.Shards); err != nil {
			return false
		}
	}
	return true
}
