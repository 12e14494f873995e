package tunnel

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/policy"
)

// path is one uplink of a bond: its policy state, its send queue, and the
// QUIC connection currently serving it (nil while down). Connections come
// and go; the path and its counters outlive them.
type path struct {
	bond  *Bond
	name  string
	state *policy.Path
	queue *sendQueue
	loss  fec.LossIntervals // RFC 5348 §5.4 loss rate, fed by the tracer

	conn atomic.Pointer[quic.Conn]
	rec  atomic.Pointer[recorder] // the current connection's tracer

	// serveMu serialises connections: a new one waits until the previous
	// one's routines have stopped.
	serveMu sync.Mutex

	txPackets, txBytes, rxPackets, rxBytes  atomic.Uint64
	tooLarge, sendErr, rxQueueFull, rescued atomic.Uint64
	lastErr                                 atomic.Pointer[string]
}

func newPath(b *Bond, name string, labels map[string]string) *path {
	p := &path{bond: b, name: name, state: policy.NewPath(name, labels, b.popts.QueuePackets)}
	p.queue = newSendQueue(b.popts.QueuePackets, b.popts.MaxQueueDelay, p.state.SetQueueLen)
	return p
}

func (p *path) setErr(err error) {
	s := ""
	if err != nil {
		s = err.Error()
	}
	p.lastErr.Store(&s)
}

// serve runs conn as this path's connection until the connection ends or
// stop is closed (then it closes conn). It starts the path's send and
// receive routines (send.go, receive.go) and returns after both have
// stopped. rec is the connection's tracer.
func (p *path) serve(conn *quic.Conn, rec *recorder, stop <-chan struct{}) {
	if old := p.conn.Load(); old != nil {
		old.CloseWithError(codeReplaced, "path replaced by a new connection")
	}
	p.serveMu.Lock()
	defer p.serveMu.Unlock()

	p.queue.drain() // frames queued for a dead connection are stale
	p.conn.Store(conn)
	p.rec.Store(rec)
	rec.loss.Store(&p.loss)
	rec.path.Store(p.state)
	p.state.SetConnected(true, time.Now())
	p.setErr(nil)

	var wg sync.WaitGroup
	wg.Go(func() { p.routineSend(conn) })
	wg.Go(func() { p.routineReceive(conn) })
	select {
	case <-conn.Context().Done():
	case <-stop: // shutdown, even if it raced with this connection's dial
		conn.CloseWithError(codeShutdown, "shutting down")
		<-conn.Context().Done()
	}

	p.state.SetConnected(false, time.Time{})
	p.conn.CompareAndSwap(conn, nil)
	wg.Wait()
	p.rxQueueFull.Add(rec.datagramsDropped.Swap(0))
	p.rec.CompareAndSwap(rec, nil)
	p.rescue(nil)
}

// rescue moves first (if not nil) and the frames still queued on p to other
// paths, once p's connection has failed: they were accepted from the TUN and
// are not lost because one uplink died. Frames older than MaxQueueDelay, and
// frames no other path can take, are dropped and counted.
func (p *path) rescue(first *frame) {
	set := p.bond.paths.Load()
	picks := make([]int, len(set.paths))
	now := time.Now()
	move := func(f frame) {
		if p.bond.picker.Pick(set.states, now, picks) == 0 || set.paths[picks[0]] == p {
			putBuf(f.buf)
			p.bond.ctr.noPath.Add(1)
			return
		}
		set.paths[picks[0]].queue.push(f)
		p.rescued.Add(1)
	}
	if first != nil {
		move(*first)
	}
	for {
		f, ok := p.queue.pop(now.UnixNano())
		if !ok {
			return
		}
		move(f)
	}
}

func (p *path) stats(now time.Time) PathStats {
	full, expired := p.queue.drops()
	s := PathStats{
		Name:             p.name,
		Labels:           p.state.Labels,
		Status:           p.state.Status(now).String(),
		SmoothedRTT:      p.state.SmoothedRTT(),
		MinRTT:           p.state.MinRTT(),
		CongestionWindow: p.state.CongestionWindow(),
		BytesInFlight:    p.state.BytesInFlight(),
		PacketsSent:      p.state.PacketsSent(),
		PacketsLost:      p.state.PacketsLost(),
		QueueLen:         p.state.QueueLen(),
		TxPackets:        p.txPackets.Load(),
		TxBytes:          p.txBytes.Load(),
		RxPackets:        p.rxPackets.Load(),
		RxBytes:          p.rxBytes.Load(),
		Drops: PathDrops{
			QueueFull:        full,
			Expired:          expired,
			TooLarge:         p.tooLarge.Load(),
			SendError:        p.sendErr.Load(),
			ReceiveQueueFull: p.rxQueueFull.Load(),
		},
		Rescued: p.rescued.Load(),
	}
	if rec := p.rec.Load(); rec != nil {
		s.Drops.ReceiveQueueFull += rec.datagramsDropped.Load()
	}
	if e := p.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	if c := p.conn.Load(); c != nil {
		cs := c.ConnectionStats()
		s.Conn = &ConnStats{LatestRTT: cs.LatestRTT, MeanDeviation: cs.MeanDeviation, BytesSent: cs.BytesSent,
			PacketsSent: cs.PacketsSent, BytesLost: cs.BytesLost, PacketsLost: cs.PacketsLost, BytesReceived: cs.BytesReceived}
	}
	return s
}
