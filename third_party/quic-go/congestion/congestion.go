// Package congestion lets an application install its own congestion
// controller on a connection (Config.CongestionControl). It is not part of
// upstream quic-go: bondd's fork adds it (third_party/quic-go.patch).
//
// A Controller is called on the connection's own goroutine only, so it
// needs no locking for its own state; whatever it shares with other
// goroutines it must share safely. Byte counts are UDP payload bytes of
// QUIC packets; packet numbers are those of the packet's number space.
package congestion

import (
	"context"
	"time"
)

// Controller is a connection's congestion controller (RFC 9002 §7): quic-go
// reports each packet sent, acknowledged, lost or abandoned, and asks it
// whether a packet may be sent now (the window) and when (the pacer).
type Controller interface {
	// OnPacketSent is called after each packet is sent at sent, with the
	// bytes in flight including it (if ackEliciting: only ack-eliciting
	// packets count in flight).
	OnPacketSent(sent time.Time, bytesInFlight int64, pn int64, bytes int64, ackEliciting bool)
	// OnPacketAcked is called for each newly acknowledged in-flight packet
	// of an ACK frame received at ackTime; priorInFlight is the bytes in
	// flight before the frame was processed.
	OnPacketAcked(pn int64, bytes int64, priorInFlight int64, ackTime time.Time)
	// OnPacketLost is called for each packet loss detection declares lost
	// (RFC 9002 §6.1), and with bytes 0 and pn the largest acknowledged
	// when an ACK frame's ECN counts report congestion (§7.1).
	OnPacketLost(pn int64, bytes int64, priorInFlight int64)
	// OnPacketAbandoned is called when the probe timeout (RFC 9002 §6.2)
	// takes an outstanding packet out of the bytes in flight to resend its
	// frames, without declaring it lost. A packet that carried only
	// DATAGRAM frames (RFC 9221 §5.2: never retransmitted) is gone: no
	// later event names it.
	OnPacketAbandoned(pn int64, bytes int64)
	// OnSpuriousLoss is called when a packet declared lost is acknowledged.
	OnSpuriousLoss(pn int64)
	// OnRetransmissionTimeout is called when the probe timeout fires.
	OnRetransmissionTimeout(packetsRetransmitted bool)
	// MaybeExitSlowStart is called after the RTT was updated by an ACK.
	MaybeExitSlowStart()

	// CanSend reports whether a packet may be sent with bytesInFlight in
	// flight (the congestion window).
	CanSend(bytesInFlight int64) bool
	// HasPacingBudget reports whether the pacer lets a packet go at now.
	HasPacingBudget(now time.Time) bool
	// TimeUntilSend returns when the pacer lets the next packet go (the
	// zero time: now).
	TimeUntilSend(bytesInFlight int64) time.Time
	// SetMaxDatagramSize is called when the path MTU (the largest UDP
	// payload, bytes) changes.
	SetMaxDatagramSize(size int64)

	// CongestionWindow returns the window, bytes (qlog and statistics).
	CongestionWindow() int64
	// InSlowStart and InRecovery report the controller's state (qlog).
	InSlowStart() bool
	InRecovery() bool
}

// Observer, when a Controller also implements it, hears what quic-go
// otherwise tells only a qlog tracer, so that an application needs no
// tracer on the per-packet path (quic-go builds qlog events only for one).
type Observer interface {
	// OnDatagramSent is called, before OnPacketSent, for each DATAGRAM
	// frame (RFC 9221) packet pn carries, in order: its payload, bytes.
	OnDatagramSent(pn int64, length int64)
	// OnDatagramDropped is called for a DATAGRAM frame quic-go dropped: a
	// received one when the receive queue was full (received), or one to
	// send that no packet could fit.
	OnDatagramDropped(received bool, length int64)
	// OnPacketReceived is called for each packet received from the peer,
	// once its frames were handled, and for a Retry (RFC 9000 §17.2.5).
	OnPacketReceived()
}

// RTTStats is the connection's RTT estimate (RFC 9002 §5). Read it from the
// Controller's methods only: quic-go updates it on the same goroutine.
type RTTStats interface {
	MinRTT() time.Duration
	SmoothedRTT() time.Duration
	LatestRTT() time.Duration
	MeanDeviation() time.Duration
}

// Factory returns the controller of a new connection (or of a connection
// whose path changed: a migration starts congestion control afresh). ctx is
// the connection's context (Conn.Context); def is quic-go's own controller
// for it (NewReno with a pacer), which the factory may return as it is,
// wrap, or replace.
type Factory func(ctx context.Context, def Controller, rtt RTTStats) Controller
