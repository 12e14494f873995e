package tunnel

import "sync"

// bufferSize is the size of every pooled packet buffer in bytes: the header
// headroom plus the largest inner packet bondd carries (a datagram payload
// never exceeds quic-go's 1452-byte packet limit).
const bufferSize = Headroom + 1500

// packetBuf is one pooled buffer. Pointers to fixed-size arrays keep the pool
// free of per-Put allocations.
type packetBuf [bufferSize]byte

var bufPool = sync.Pool{New: func() any { return new(packetBuf) }}

func getBuf() *packetBuf  { return bufPool.Get().(*packetBuf) }
func putBuf(b *packetBuf) { bufPool.Put(b) }
