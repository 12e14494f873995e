// Package policy holds live path state and decides which path or paths carry
// each packet.
//
// A [Path] is one uplink as the scheduler sees it: a name, labels, a status
// and the congestion signals that the tunnel package feeds in from the QUIC
// stack (smoothed and minimum RTT, congestion window, bytes in flight, loss
// events) plus its send-queue depth. All of it is read on the per-packet path
// through atomics; nothing here takes a lock per packet.
//
// A [Picker] turns the path set into a choice: the baseline schedulers
// (round-robin, minRTT, BLEST, redundant) and [LowestRTT]. [Select] wraps a
// picker with a rule directive (MoMQ §3): affinity and single_path through
// a bounded [History] of object-to-path assignments, then prefer, then
// duplicate. Paths may carry a byte [Budget] per calendar period, which
// turns them DEGRADED for default choices near its end.
//
// The annotation providers fill rules.Annotations for each packet:
// [LEOState] from the paths' LEO reconfiguration markers ([LEOReconf]) and
// [PendingIFrame] from the pending I-frame tracker (MoMQ §4.1, eq. 1).
//
// Each path's rate is bondd's: a [RateEstimator] turns the receiver's
// [RateReport]s into a target that a [Pacer] enforces (rate.go, pacer.go).
//
// policy never sees QUIC or TUN: it speaks in durations, byte counts and
// path indexes.
package policy
