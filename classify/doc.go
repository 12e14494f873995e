// Package classify turns one IP packet into the Metadata that bondd's rules
// match on: the IPv4/IPv6 5-tuple, DSCP and ECN, length and fragment position;
// for UDP the RTP header (RFC 3550) and, for video, the codec, frame type
// (keyframe or delta), frame identity and temporal/spatial layer; and the
// config-defined traffic class with its labels.
//
// # Use
//
// One Classifier serves one bond and is called from that bond's single TUN
// reader goroutine:
//
//	c, err := classify.New(classify.Options{RTPPorts: []classify.PortRange{{Lo: 5004, Hi: 5005}}})
//	var md classify.Metadata // reused for every packet
//	for _, pkt := range batch {
//		if r := c.Parse(pkt, &md); r != classify.ReasonNone {
//			drops[r]++ // a per-packet problem is a reason, never an error
//		}
//		if v, ok := md.AppendValue(buf[:0], classify.KeyFrameType); ok { ... }
//	}
//
// Parse allocates nothing, never panics on any input, keeps no reference to
// pkt after it returns, and Metadata holds no pointer into pkt.
//
// # Concurrency
//
// A Classifier is not safe for concurrent use: Parse, Stats and Reset must be
// called from one goroutine (the bond's TUN reader), which keeps the packet
// path free of locks and atomics. SetClasses is the exception: it publishes an
// immutable *ClassSet through an atomic pointer and may be called from any
// goroutine (configuration reload). ClassSet, and every package-level
// function, is safe for concurrent use.
//
// # State and bounds
//
// Parse keeps three bounded tables, all set-associative with least-recently-
// used replacement, so a flood of new flows evicts old state but never grows
// memory: MaxFragments IP fragment flows (so that non-first fragments inherit
// the ports and video metadata of their first fragment), MaxProbation RTP
// sources under the RTP heuristic's probation and MaxStreams confirmed RTP or
// MPEG-TS streams (codec detection and the last FramesPerStream frames, so
// that every packet of a keyframe is marked, not only the first). A
// Classifier uses about 37 KiB in all.
//
// The key names, their values and units, the codec rules with their RFC
// references and the bounds are documented in docs/classify.md.
package classify
