// Package policy holds live path state and decides which path or paths carry
// each packet.
//
// A [Path] is one uplink as the scheduler sees it: a name, labels, a status
// and the congestion signals that the tunnel package feeds in from the QUIC
// stack (smoothed and minimum RTT, congestion window, bytes in flight, loss
// events) plus its send-queue depth. All of it is read on the per-packet path
// through atomics; nothing here takes a lock per packet.
//
// A [Picker] turns the path set into a choice. policy never sees QUIC or TUN:
// it speaks in durations, byte counts and path indexes.
package policy
