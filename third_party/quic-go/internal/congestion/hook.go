package congestion

import (
	"context"
	"time"

	pub "github.com/quic-go/quic-go/congestion"
	"github.com/quic-go/quic-go/internal/monotime"
	"github.com/quic-go/quic-go/internal/protocol"
)

// Hook returns the controller a connection uses: def when f is nil or
// returns def unwrapped, otherwise f's controller behind an adapter.
func Hook(f pub.Factory, ctx context.Context, def SendAlgorithmWithDebugInfos, rtt pub.RTTStats) SendAlgorithmWithDebugInfos {
	if f == nil {
		return def
	}
	c := f(ctx, exported{def}, rtt)
	switch c := c.(type) {
	case nil:
		return def
	case exported:
		return c.s
	}
	return hooked{c}
}

// Abandoner is implemented by a hooked controller: it hears of packets the
// probe timeout takes out of flight (pub.Controller.OnPacketAbandoned).
type Abandoner interface {
	OnPacketAbandoned(protocol.PacketNumber, protocol.ByteCount)
}

// ObserverOf returns the application's controller behind s as a
// pub.Observer, or nil.
func ObserverOf(s SendAlgorithmWithDebugInfos) pub.Observer {
	if h, ok := s.(hooked); ok {
		o, _ := h.c.(pub.Observer)
		return o
	}
	return nil
}

// exported is quic-go's own controller as a pub.Controller.
type exported struct{ s SendAlgorithmWithDebugInfos }

func (e exported) OnPacketSent(t time.Time, inFlight, pn, n int64, eliciting bool) {
	e.s.OnPacketSent(monotime.FromTime(t), protocol.ByteCount(inFlight), protocol.PacketNumber(pn), protocol.ByteCount(n), eliciting)
}
func (e exported) OnPacketAcked(pn, n, prior int64, t time.Time) {
	e.s.OnPacketAcked(protocol.PacketNumber(pn), protocol.ByteCount(n), protocol.ByteCount(prior), monotime.FromTime(t))
}
func (e exported) OnPacketLost(pn, n, prior int64) {
	e.s.OnCongestionEvent(protocol.PacketNumber(pn), protocol.ByteCount(n), protocol.ByteCount(prior))
}
func (e exported) OnPacketAbandoned(int64, int64)   {}
func (e exported) OnSpuriousLoss(pn int64)          { e.s.OnSpuriousLoss(protocol.PacketNumber(pn)) }
func (e exported) OnRetransmissionTimeout(r bool)   { e.s.OnRetransmissionTimeout(r) }
func (e exported) MaybeExitSlowStart()              { e.s.MaybeExitSlowStart() }
func (e exported) CanSend(inFlight int64) bool      { return e.s.CanSend(protocol.ByteCount(inFlight)) }
func (e exported) HasPacingBudget(t time.Time) bool { return e.s.HasPacingBudget(monotime.FromTime(t)) }
func (e exported) SetMaxDatagramSize(n int64)       { e.s.SetMaxDatagramSize(protocol.ByteCount(n)) }
func (e exported) CongestionWindow() int64          { return int64(e.s.GetCongestionWindow()) }
func (e exported) InSlowStart() bool                { return e.s.InSlowStart() }
func (e exported) InRecovery() bool                 { return e.s.InRecovery() }
func (e exported) TimeUntilSend(inFlight int64) time.Time {
	return e.s.TimeUntilSend(protocol.ByteCount(inFlight)).ToTime()
}

// hooked is an application's pub.Controller as quic-go's SendAlgorithm.
type hooked struct{ c pub.Controller }

func (h hooked) OnPacketSent(t monotime.Time, inFlight protocol.ByteCount, pn protocol.PacketNumber, n protocol.ByteCount, eliciting bool) {
	h.c.OnPacketSent(t.ToTime(), int64(inFlight), int64(pn), int64(n), eliciting)
}
func (h hooked) OnPacketAcked(pn protocol.PacketNumber, n, prior protocol.ByteCount, t monotime.Time) {
	h.c.OnPacketAcked(int64(pn), int64(n), int64(prior), t.ToTime())
}
func (h hooked) OnCongestionEvent(pn protocol.PacketNumber, n, prior protocol.ByteCount) {
	h.c.OnPacketLost(int64(pn), int64(n), int64(prior))
}
func (h hooked) OnPacketAbandoned(pn protocol.PacketNumber, n protocol.ByteCount) {
	h.c.OnPacketAbandoned(int64(pn), int64(n))
}
func (h hooked) OnSpuriousLoss(pn protocol.PacketNumber)  { h.c.OnSpuriousLoss(int64(pn)) }
func (h hooked) OnRetransmissionTimeout(r bool)           { h.c.OnRetransmissionTimeout(r) }
func (h hooked) MaybeExitSlowStart()                      { h.c.MaybeExitSlowStart() }
func (h hooked) CanSend(inFlight protocol.ByteCount) bool { return h.c.CanSend(int64(inFlight)) }
func (h hooked) HasPacingBudget(t monotime.Time) bool     { return h.c.HasPacingBudget(t.ToTime()) }
func (h hooked) SetMaxDatagramSize(n protocol.ByteCount)  { h.c.SetMaxDatagramSize(int64(n)) }
func (h hooked) GetCongestionWindow() protocol.ByteCount {
	return protocol.ByteCount(h.c.CongestionWindow())
}
func (h hooked) InSlowStart() bool { return h.c.InSlowStart() }
func (h hooked) InRecovery() bool  { return h.c.InRecovery() }
func (h hooked) TimeUntilSend(inFlight protocol.ByteCount) monotime.Time {
	return monotime.FromTime(h.c.TimeUntilSend(int64(inFlight)))
}
