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

	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/policy"
)

// recorder turns one connection's qlog events into plain calls on the
// path's policy state: MetricsUpdated → OnMetrics, PacketLost (RFC 9002 loss
// detection) → OnLoss, PacketSent → OnSent, PacketReceived → OnReceive; lost
// and sent packets also feed the path's FEC loss-interval estimator. It implements both
// qlogwriter.Trace and qlogwriter.Recorder. On the concentrator the path is
// only known after the hello, so events before that are ignored. RecordEvent
// runs on quic-go's goroutines: it only stores atomics.
type recorder struct {
	path             atomic.Pointer[policy.Path]
	loss             atomic.Pointer[fec.LossIntervals]
	datagramsDropped atomic.Uint64 // receive queue overflow inside quic-go
}

func (r *recorder) AddProducer() qlogwriter.Recorder { return r }
func (r *recorder) Close() error                     { return nil }

func (r *recorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.DatagramDropped:
		r.datagramsDropped.Add(1)
	case qlog.MetricsUpdated:
		if p := r.path.Load(); p != nil {
			p.OnMetrics(e.SmoothedRTT, e.MinRTT, e.CongestionWindow, e.BytesInFlight)
		}
	case qlog.PacketLost:
		if p := r.path.Load(); p != nil && !e.IsMTUProbePacket {
			p.OnLoss(1)
			if l := r.loss.Load(); l != nil {
				l.OnLoss(time.Now(), p.SmoothedRTT())
			}
		}
	case qlog.PacketSent:
		if p := r.path.Load(); p != nil {
			p.OnSent()
			if l := r.loss.Load(); l != nil {
				l.OnSent(1)
			}
		}
	case qlog.PacketReceived:
		if p := r.path.Load(); p != nil {
			p.OnReceive(time.Now())
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
