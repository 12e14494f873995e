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
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// recorder turns one connection's qlog events into plain calls on the state
// of its path: MetricsUpdated → the connection's congestion state and the
// path's (pathconn.go), PacketLost (RFC 9002 loss detection) →
// policy.Path.OnLoss, PacketSent → OnSent and the connection's count of
// datagrams left in quic-go's send queue, PacketReceived → OnReceive; lost
// and sent packets also feed the path's FEC loss-interval estimator.
// Acknowledged packets and those quic-go's probe timeout abandoned reach it
// from the connection's congestion controller instead (cc.go, sentring.go). It
// implements both qlogwriter.Trace and qlogwriter.Recorder. On the
// concentrator the path is only known after the hello, so events before
// that are ignored. RecordEvent runs on quic-go's goroutines: it only
// stores atomics (and takes LossIntervals' small mutex on a loss).
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
	// sizes remembers the last pmtuRing 1-RTT packets sent, by packet
	// number: datagram size and flags (sentring.go).
	sizes [pmtuRing]atomic.Uint32
	// held keeps the data datagrams handed to the connection until their
	// packet is settled, and resends the lost ones (resend.go).
	held resendState
}

// attach makes pc the path connection whose state the events feed, and
// counts the drops seen before it on its path.
func (r *recorder) attach(pc *pathConn) {
	r.pc.Store(pc)
	pc.path.drops.addN(DropReceiveQueueFull, r.early.Swap(0))
}

func (r *recorder) AddProducer() qlogwriter.Recorder { return r }
func (r *recorder) Close() error                     { return nil }

func (r *recorder) RecordEvent(ev qlogwriter.Event) {
	pc := r.pc.Load()
	switch e := ev.(type) {
	case qlog.DatagramDropped:
		if e.Direction == qlog.DirectionSending { // too large for the packet after all
			r.held.dropped(e.Raw.Length)
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
	case qlog.MetricsUpdated:
		if pc != nil {
			pc.onMetrics(e.SmoothedRTT, e.MinRTT, e.CongestionWindow, e.BytesInFlight)
		}
	case qlog.PacketLost:
		if pc != nil && !e.IsMTUProbePacket {
			size, probe := 0, false
			if e.Header.PacketType == qlog.PacketType1RTT {
				pn := int64(e.Header.PacketNumber)
				var news bool
				if size, probe, news = r.noteLost(pn); !news {
					if _, _, known := r.sizeOf(pn); known {
						return // acknowledged, or abandoned at a probe timeout (sentring.go)
					}
				}
				if news {
					r.held.lost(pn, pc.path, time.Now())
				}
			}
			pc.path.datagramLost(size, probe)
		}
	case qlog.PacketSent:
		if pc != nil {
			pc.path.state.OnSent()
			if !pc.path.rc.active() {
				pc.path.loss.OnSent(1)
			}
			n, eliciting, size := 0, false, 0
			oneRTT := e.Header.PacketType == qlog.PacketType1RTT
			for _, f := range e.Frames {
				switch df := f.Frame.(type) {
				case *qlog.DatagramFrame:
					if oneRTT {
						r.held.packed(int64(e.Header.PacketNumber), int(df.Length), n == 0)
					}
					n++
					eliciting = true
					size = max(size, int(df.Length))
				case *qlog.AckFrame, *qlog.ConnectionCloseFrame:
				default:
					eliciting = true // RFC 9002 §2: all other frames elicit an ACK
				}
			}
			// A path MTU probe of bondd's (pmtu.go) is marked by its size.
			probe := size > 0 && int64(size) == pc.probeSize.Load() && pc.probeSize.CompareAndSwap(int64(size), 0)
			now := time.Now()
			if oneRTT {
				r.noteSent(int64(e.Header.PacketNumber), probe, size)
			}
			if size > pmtuBase && !probe && pc.path.pmtu.bigSince.Load() == 0 {
				pc.path.pmtu.bigSince.CompareAndSwap(0, now.UnixNano())
			}
			if eliciting && !e.IsMTUProbePacket && !probe { // a probe too large for the path is lost by design (RFC 8899)
				pc.path.state.OnAckEliciting(now)
			}
			if n > 0 {
				pc.onDatagramsSent(n)
			}
		}
	case qlog.PacketReceived:
		if pc != nil {
			pc.path.heard(time.Now()) // liveness.go
		} else if !r.answered.Load() {
			r.answered.Store(true)
		}
	}
}

type recorderKey struct{}

// withQlogFile returns the trace of one connection: rec alone when dir is
// empty, as without qlog; otherwise rec and a qlog file in dir, fanned out.
// rec may be nil (a concentrator connection made outside ConnContext).
func withQlogFile(rec *recorder, dir string, isClient bool, odcid quic.ConnectionID) qlogwriter.Trace {
	if dir == "" {
		if rec == nil {
			return nil // no typed nil: quic-go checks the interface
		}
		return rec
	}
	file := &qlogFile{dir: dir, isClient: isClient, odcid: odcid}
	if rec == nil {
		return file
	}
	return fanoutTrace{rec, file}
}

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

// fanoutTrace sends a connection's events to several traces: the recorder
// that feeds policy and fec, and a qlog file.
type fanoutTrace []qlogwriter.Trace

func (t fanoutTrace) AddProducer() qlogwriter.Recorder {
	rs := make(fanoutRecorder, 0, len(t))
	for _, tr := range t {
		if r := tr.AddProducer(); r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// fanoutRecorder records each event into every recorder, in order.
type fanoutRecorder []qlogwriter.Recorder

func (rs fanoutRecorder) RecordEvent(ev qlogwriter.Event) {
	for _, r := range rs {
		r.RecordEvent(ev)
	}
}

func (rs fanoutRecorder) Close() error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
