// Package tunnel is the bond: it carries IP packets between a TUN device and
// a peer over one QUIC connection per uplink, as QUIC DATAGRAMs (RFC 9221).
//
// Directions are named relative to the network, as in WireGuard: "send"
// takes packets read from the local TUN and puts them on a path; "receive"
// takes datagrams from a path and writes the inner packets to the TUN.
//
// The same code runs on both ends. An [Edge] owns one [Bond] and dials one
// connection per uplink; a [Concentrator] accepts connections, authenticates
// them, groups the connections of one edge into one Bond, and routes downlink
// packets to the Bond whose allowed prefixes hold the destination.
//
// See send.go and receive.go for the per-packet stages and the goroutines
// that run them.
package tunnel
