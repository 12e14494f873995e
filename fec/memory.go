package fec

import "unsafe"

// MemoryBytes returns the bytes the decoder holds now: its block table and
// slot arrays, the per-class indexes of the classes seen, the shard
// buffers allocated so far and the reconstruction scratch. It does not
// count the Reed–Solomon codecs, which are shared. Safe for concurrent use.
func (d *Decoder) MemoryBytes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int(unsafe.Sizeof(*d))
	n += cap(d.ents) * int(unsafe.Sizeof(entry{}))
	for i := range d.ents {
		n += cap(d.ents[i].slot) * 2
	}
	for _, cs := range d.classes {
		if cs != nil {
			n += int(unsafe.Sizeof(*cs)) + cap(cs.index)*8
		}
	}
	for _, b := range d.bufs {
		n += cap(b)
	}
	n += cap(d.bufs)*int(unsafe.Sizeof([]byte(nil))) + cap(d.free)*2
	n += cap(d.out) + cap(d.mat) + cap(d.work) + (cap(d.missing)+cap(d.parIdx))*8
	return n
}

// Pending reports whether a block may still be open (waiting for packets
// or its timeout): it is false only when every block had completed or
// expired at the last AddData, AddParity or Expire call. Safe for
// concurrent use.
func (d *Decoder) Pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tail < d.head
}
