package tunnel

import (
	"sync/atomic"
	"time"

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
