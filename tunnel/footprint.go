package tunnel

import "unsafe"

// Accessors for load tests and sizing (bondd bench scale): how many of a
// bond's paths are up, and how many bytes its per-bond structures hold.

// PathsUp returns the number of the bond's paths that have a live
// connection. Lock-free; cheap enough to poll for thousands of
// bonds.
func (b *Bond) PathsUp() int {
	n := 0
	for _, p := range b.paths.Load().paths {
		if p.connected() {
			n++
		}
	}
	return n
}

// Footprint is the memory a bond's own structures hold, in bytes, by
// part. It counts the backing arrays bondd allocates (capacity × element
// size), not quic-go's connection state nor goroutine stacks.
type Footprint struct {
	FECDecoder int `json:"fec_decoder_bytes"` // block table, index and shard buffers of the receive side
	FECEncoder int `json:"fec_encoder_bytes"` // parity buffers of the send side
	Queues     int `json:"queues_bytes"`      // the paths' send-queue rings
	Dedupe     int `json:"dedupe_bytes"`      // the duplicate filter's window
}

// Total returns the sum of the parts, bytes.
func (f Footprint) Total() int { return f.FECDecoder + f.FECEncoder + f.Queues + f.Dedupe }

// Footprint returns the bytes the bond's FEC decoder and encoder, send
// queues and duplicate filter hold now.
func (b *Bond) Footprint() Footprint {
	var f Footprint
	f.FECDecoder = b.dec.MemoryBytes()
	if s := b.fecTx; s != nil {
		for _, bufs := range [][][]byte{s.par.Bufs, s.parT.Bufs} {
			for _, buf := range bufs {
				f.FECEncoder += cap(buf)
			}
		}
	}
	for _, p := range b.paths.Load().paths {
		f.Queues += p.queue.memoryBytes()
	}
	b.rx.Lock()
	f.Dedupe = b.rx.dedupe.memoryBytes()
	b.rx.Unlock()
	return f
}

// memoryBytes returns the bytes of the queue's band rings and of its
// parked ring.
func (q *sendQueue) memoryBytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := cap(q.parked.buf)
	for i := range q.bands {
		n += cap(q.bands[i].buf)
	}
	return n * int(unsafe.Sizeof(frame{}))
}

// memoryBytes returns the bytes of the filter's window.
func (d *dedupe) memoryBytes() int {
	if d.bits == nil {
		return 0
	}
	return int(unsafe.Sizeof(*d.bits))
}
