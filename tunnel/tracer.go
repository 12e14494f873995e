package tunnel

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/bondd/bondd/internal/monoclock"
)

// recorder turns what quic-go tells one connection's congestion controller
// (cc.go: congestion.Controller and congestion.Observer, the quic-go fork's
// hook) into plain calls on the state of its path:
//
//   - a packet sent → policy.Path.OnSent, OnAckEliciting, the path's FEC
//     loss-interval estimator, the connection's count of datagrams left in
//     quic-go's send queue (pathconn.go), and the ring of sent packets
//     (sentring.go) with the largest DATAGRAM frame each carried, which
//     quic-go reports frame by frame just before (datagramSent);
//   - a packet acknowledged, lost (RFC 9002 loss detection) or abandoned
//     at a probe timeout → the ring, resends (resend.go), path MTU
//     discovery (pmtu.go) and policy.Path.OnLoss (sentring.go);
//   - a packet received → liveness (path.heard);
//   - a DATAGRAM frame dropped → the path's drop counters.
//
// quic-go thus builds no qlog event for bondd: it builds them only for a
// connection with a tracer, which a path connection has only when the
// operator asks for qlog files (PathOptions.QlogDir, qlogFile), and each
// event is a few allocations per packet. On the concentrator the path is
// only known after the hello, so events before that are ignored. The
// methods run on the connection's goroutine: the pending fields need no
// lock, and the rest are atomics (and LossIntervals' small mutex on a
// loss).
type recorder struct {
	pc atomic.Pointer[pathConn]
	// early counts receive-queue overflows inside quic-go before the path
	// is known; attach moves them to the path's DropReceiveQueueFull.
	early atomic.Uint64
	// accepted is set on the concentrator when the connection completed its
	// handshake and reached the accept loop (conc_transport.go).
	accepted atomic.Bool
	// handshaking is set on the concentrator while the connection's
	// handshake counts as in progress for admission (conc_admit.go).
	handshaking atomic.Bool
	// answered is set on the edge when the concentrator's first packet
	// arrives during the handshake (Edge.dial).
	answered atomic.Bool
	// sizes remembers the last pmtuRing packets sent, by packet
	// number: datagram size and flags (sentring.go).
	sizes [pmtuRing]atomic.Uint32
	// held keeps the data datagrams handed to the connection until their
	// packet is settled, and resends the lost ones (resend.go).
	held resendState
	// The DATAGRAM frames reported for packet pendPN, not yet sent: how
	// many and the largest's payload, bytes.
	pendPN             int64
	pendN, pendLargest int
}

// attach makes pc the path connection whose state the events feed, and
// counts the drops seen before it on its path.
func (r *recorder) attach(pc *pathConn) {
	r.pc.Store(pc)
	pc.path.drops.addN(DropReceiveQueueFull, r.early.Swap(0))
}

// datagramSent handles a DATAGRAM frame of n payload bytes in packet pn,
// which quic-go reports before the packet (sent). Allocation-free.
func (r *recorder) datagramSent(pn int64, n int) {
	if r.pendN > 0 && r.pendPN != pn {
		r.pendN, r.pendLargest = 0, 0 // a packet that never reached sent
	}
	first := r.pendN == 0
	r.pendPN = pn
	r.pendN++
	r.pendLargest = max(r.pendLargest, n)
	if r.pc.Load() != nil {
		r.held.packed(pn, n, first)
	}
}

// sent handles packet pn, ack-eliciting (RFC 9002 §2) or not, with the
// DATAGRAM frames datagramSent reported for it. It reads the clock itself,
// and only when it needs it (an ack-only packet costs no clock read).
// Allocation-free.
func (r *recorder) sent(pn int64, eliciting bool) {
	n, size := 0, 0
	if r.pendN > 0 && r.pendPN == pn {
		n, size = r.pendN, r.pendLargest
	}
	r.pendN, r.pendLargest = 0, 0
	pc := r.pc.Load()
	if pc == nil {
		return
	}
	p := pc.path
	p.state.OnSent()
	if !p.rc.active() {
		p.loss.OnSent(1)
	}
	// A path MTU probe of bondd's (pmtu.go) is marked by its size.
	probe := size > 0 && int64(size) == pc.probeSize.Load() && pc.probeSize.CompareAndSwap(int64(size), 0)
	r.noteSent(pn, probe, size)
	var now time.Time
	if size > pmtuBase && !probe && p.pmtu.bigSince.Load() == 0 {
		now = time.Now()
		p.pmtu.bigSince.CompareAndSwap(0, monoclock.Nanos(now))
	}
	if eliciting && !probe { // a probe too large for the path is lost by design (RFC 8899)
		if now.IsZero() {
			now = time.Now()
		}
		p.state.OnAckEliciting(now)
	}
	if n > 0 {
		pc.onDatagramsSent(n)
	}
}

// lost handles packet pn, which quic-go's loss detection declared lost at
// now (RFC 9002 §6.1).
func (r *recorder) lost(pn int64, now time.Time) {
	pc := r.pc.Load()
	if pc == nil {
		return
	}
	size, probe, news := r.noteLost(pn)
	if !news {
		if _, _, known := r.sizeOf(pn); known {
			return // acknowledged, or abandoned at a probe timeout (sentring.go)
		}
	} else {
		r.held.lost(pn, pc.path, now)
	}
	pc.path.datagramLost(size, probe)
}

// received handles a packet received from the peer at now.
func (r *recorder) received(now time.Time) {
	if pc := r.pc.Load(); pc != nil {
		pc.path.heard(now) // liveness.go
	} else if !r.answered.Load() {
		r.answered.Store(true)
	}
}

// datagramDropped handles a DATAGRAM frame of n payload bytes that quic-go
// dropped: received while its receive queue was full, or, to send, too
// large for the packet after all.
func (r *recorder) datagramDropped(received bool, n int) {
	pc := r.pc.Load()
	if !received {
		r.held.dropped(n)
		if pc != nil {
			pc.onDatagramsSent(1)
			pc.path.drops.add(DropTooLarge)
		}
		return
	}
	if pc != nil {
		pc.path.drops.add(DropReceiveQueueFull)
	} else {
		r.early.Add(1)
	}
}

type recorderKey struct{}

// qlogFile is a connection's qlog written to <dir>/<odcid>_<client|server>.sqlog
// in JSON-SEQ by quic-go's qlogwriter.FileSeq. Both ends of a connection
// name their file by the same original destination connection ID, so an
// edge's file and its concentrator's pair up. It opens the file at the
// first AddProducer, not when quic-go asks for the trace, so that a dial
// that fails before its connection exists leaves no file or goroutine
// behind. FileSeq.Run writes the events on its own goroutine and returns,
// after flushing and closing the file, when the connection closes its
// producer. quic-go's qlog.DefaultConnectionTracer does the same but takes
// its directory from the QLOGDIR environment variable and exits the
// process when it cannot create it. A file that cannot be created leaves
// the connection without qlog; the connection itself is unaffected.
type qlogFile struct {
	dir      string
	isClient bool
	odcid    quic.ConnectionID

	once sync.Once
	seq  *qlogwriter.FileSeq // nil until AddProducer, or if the file could not be created
}

func (q *qlogFile) AddProducer() qlogwriter.Recorder {
	q.once.Do(func() {
		side := "server"
		if q.isClient {
			side = "client"
		}
		f, err := os.OpenFile(filepath.Join(q.dir, fmt.Sprintf("%s_%s.sqlog", q.odcid, side)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
		if err != nil {
			return
		}
		q.seq = qlogwriter.NewConnectionFileSeq(bufferedFile{bufio.NewWriter(f), f}, q.isClient, q.odcid)
		go q.seq.Run()
	})
	if q.seq == nil {
		return nil
	}
	return q.seq.AddProducer()
}

// bufferedFile buffers writes to f; Close flushes and closes f.
type bufferedFile struct {
	*bufio.Writer
	f *os.File
}

func (b bufferedFile) Close() error { return errors.Join(b.Flush(), b.f.Close()) }
