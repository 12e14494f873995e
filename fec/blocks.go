package fec

// The decoder's block table: a ring of entries, one per block in flight,
// found through a per-class direct-mapped index (stage 1 of the receive
// side, see decoder.go), and the shard buffers the entries hold until they
// are done, expire or are evicted (stages 2 and 4).

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
	opened   int64 // when the block's first packet arrived, ns since the decoder's epoch
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
	rebuilt  [4]uint64 // data indexes delivered by reconstruction whose original has not arrived
	rebuiltT int64     // when the block was reconstructed, ns since the decoder's epoch
}

func (e *entry) delivered(i int) bool { return e.have[i>>6]&(1<<(i&63)) != 0 }
func (e *entry) deliver(i int)        { e.have[i>>6] |= 1 << (i & 63); e.nData++ }

// takeRebuilt reports whether index i was delivered by reconstruction and
// its original had not arrived yet, and clears that mark.
func (e *entry) takeRebuilt(i int) bool {
	m := uint64(1) << (i & 63)
	if e.rebuilt[i>>6]&m == 0 {
		return false
	}
	e.rebuilt[i>>6] &^= m
	return true
}

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

// classLocked returns the state of class, creating it on first use.
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
	if d.ents == nil { // once: the first block
		d.allocLocked()
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
	*e = entry{gen: d.head, class: class, block: block, deadline: t + int64(d.o.Timeout), opened: t, state: stOpen, slot: slot}
	d.head++
	cs.index[block&d.mask] = e.gen + 1
	return e
}

// expireLocked closes the open entries whose deadline has passed, oldest
// first, stopping at the first that has not.
func (d *Decoder) expireLocked(t int64) {
	n := uint64(len(d.ents))
	if n == 0 { // no block has opened yet
		return
	}
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
