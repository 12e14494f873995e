package emu

// The release schedule of each direction: schedule runs a datagram through
// the direction's model and queues it; routineRelease writes it at its
// release time.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// direction is one direction's model and release schedule.
type direction struct {
	dir   Direction
	bell  chan struct{} // capacity 1: a new head was scheduled
	stats dirCounters
	// maxPacket is the largest IP packet, bytes, the direction carries
	// (SetMaxPacket); 0: no limit.
	maxPacket atomic.Int64

	// mu guards the following.
	mu      sync.Mutex
	link    *Link
	epoch   time.Duration // relay time of the link's model time 0
	reorder bool
	floor   time.Duration // latest release handed out (relay time)
	seq     uint64
	sched   pktHeap
}

// packet is a datagram waiting for its release time.
type packet struct {
	buf     []byte
	n       int
	release time.Duration // relay time
	seq     uint64        // tie-break: FIFO among equal release times
	sess    *session
}

var smallPool = sync.Pool{New: func() any { return &packet{buf: make([]byte, smallPacket)} }}
var largePool = sync.Pool{New: func() any { return &packet{buf: make([]byte, maxDatagram)} }}

func getPacket(n int) *packet {
	if n <= smallPacket {
		return smallPool.Get().(*packet)
	}
	return largePool.Get().(*packet)
}

func putPacket(p *packet) {
	p.sess = nil
	if len(p.buf) == smallPacket {
		smallPool.Put(p)
	} else {
		largePool.Put(p)
	}
}

// schedule runs one datagram through direction d's model and, unless it
// is dropped, queues a copy for release.
func (r *Relay) schedule(d *direction, s *session, data []byte, now time.Duration) {
	st := &d.stats
	st.packets.Add(1)
	st.bytes.Add(uint64(len(data)))
	if r.down.Load() {
		st.outage.Add(1)
		return
	}
	if m := d.maxPacket.Load(); m > 0 && int64(len(data)+s.overhead[d.dir]) > m {
		st.tooBig.Add(1)
		return
	}
	p := getPacket(len(data))
	p.n = copy(p.buf, data)
	p.sess = s

	d.mu.Lock()
	if len(d.sched) >= r.opts.MaxScheduled {
		d.mu.Unlock()
		putPacket(p)
		st.other.Add(1)
		return
	}
	rel, drop := d.link.Send(now-d.epoch, len(data)+s.overhead[d.dir])
	if drop != Delivered {
		d.mu.Unlock()
		putPacket(p)
		st.drop(drop)
		return
	}
	rel += d.epoch
	if !d.reorder {
		rel = max(rel, d.floor)
	}
	d.floor = max(d.floor, rel)
	p.release, p.seq = rel, d.seq
	d.seq++
	d.sched.push(p)
	head := d.sched[0] == p
	d.mu.Unlock()
	if head {
		select {
		case d.bell <- struct{}{}:
		default:
		}
	}
}

// routineRelease writes direction d's datagrams at their release times.
func (r *Relay) routineRelease(d *direction) {
	defer r.wg.Done()
	r.log.Debug("routineRelease started", "dir", d.dir.String())
	defer r.log.Debug("routineRelease stopped", "dir", d.dir.String())
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*packet, 0, releaseBatch)
	for {
		if r.isClosed() {
			return
		}
		d.mu.Lock()
		if len(d.sched) == 0 {
			d.mu.Unlock()
			select {
			case <-d.bell:
			case <-r.done:
				return
			}
			continue
		}
		now := r.now()
		if head := d.sched[0].release; head > now {
			d.mu.Unlock()
			r.waitUntil(d, timer, head)
			continue
		}
		for len(d.sched) > 0 && d.sched[0].release <= now && len(batch) < releaseBatch {
			batch = append(batch, d.sched.pop())
		}
		d.mu.Unlock()
		for i, p := range batch {
			r.write(d, p)
			batch[i] = nil
		}
		batch = batch[:0]
	}
}

// waitUntil returns at relay time until, or earlier when d's bell rings
// (a new head may be due sooner) or the relay closes.
func (r *Relay) waitUntil(d *direction, timer *time.Timer, until time.Duration) {
	for {
		left := until - r.now()
		if left <= 0 {
			return
		}
		coarse := r.opts.CoarseTimers
		if coarse || left > timerMargin {
			wait := left
			if !coarse {
				wait = left - timerMargin
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
				if coarse {
					return
				}
				continue
			case <-d.bell:
			case <-r.done:
			}
			timer.Stop()
			return
		}
		if spin := r.opts.SpinWindow; left > spin {
			preciseSleep(min(left-spin, sleepChunk))
			select {
			case <-d.bell:
				return
			case <-r.done:
				return
			default:
			}
			continue
		}
		for r.now() < until {
			// Spin through the last SpinWindow before the release time,
			// yielding so that the readers keep running: a spin that
			// holds its P starves them on a 2-core machine.
			runtime.Gosched()
		}
		return
	}
}

// write sends one released datagram and returns its buffer to the pool.
func (r *Relay) write(d *direction, p *packet) {
	st := &d.stats
	if r.down.Load() {
		st.outage.Add(1)
		putPacket(p)
		return
	}
	s := p.sess
	b := p.buf[:p.n]
	var err error
	if d.dir == Up {
		if s.udp != nil {
			_, err = s.udp.WriteToUDPAddrPort(b, r.upstream)
		} else {
			_, err = s.conn.WriteTo(b, r.upstreamAddr)
		}
	} else {
		if r.listenUDP != nil {
			_, err = r.listenUDP.WriteToUDPAddrPort(b, s.client)
		} else {
			_, err = r.listen.WriteTo(b, s.clientAddr)
		}
	}
	if err != nil {
		st.other.Add(1)
	} else {
		st.delivered.Add(1)
		st.deliveredBytes.Add(uint64(p.n))
		st.late.add(r.now() - p.release)
	}
	putPacket(p)
}

// pktHeap is a binary min-heap of packets by (release, seq).
type pktHeap []*packet

func (h pktHeap) less(i, j int) bool {
	if h[i].release != h[j].release {
		return h[i].release < h[j].release
	}
	return h[i].seq < h[j].seq
}

func (h *pktHeap) push(p *packet) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *pktHeap) pop() *packet {
	s := *h
	p := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	for i := 0; ; {
		l, rt, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if rt < len(s) && s.less(rt, m) {
			m = rt
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return p
}
