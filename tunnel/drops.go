package tunnel

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
)

// DropReason says why the tunnel dropped a packet (an inner packet read
// from the TUN, or a datagram). Each drop is counted once, under one
// reason, in the counters of the bond or the path where it happened
// (BondStats.Drops, PathStats.Drops), or of the concentrator when no bond
// is concerned; status, metrics and docs/operations.md use the names of
// String. Adding a reason: one constant below and one row in dropInfo.
type DropReason uint8

// Drop reasons. Bond: counted per bond; path: per path; concentrator: per
// concentrator, for packets that belong to no bond.
const (
	DropNoPath           DropReason = iota // bond: no path could take the packet
	DropOversize                           // bond: longer than the MTU (answered with ICMP when allowed)
	DropLinkLocal                          // bond, concentrator: link-local or link-scope multicast destination: not routed
	DropParitySkipped                      // bond: an FEC parity datagram not queued, no path had window or queue room (or none was up)
	DropBadHeader                          // bond: a datagram with a malformed bondd header
	DropBadFEC                             // bond: a datagram whose FEC fields the decoder rejected (fec.Bad)
	DropDuplicate                          // bond: sequence number seen before, or the data packet FEC rebuilt already
	DropTooOld                             // bond: sequence number behind the duplicate window
	DropSpoofed                            // bond: inner source outside the edge's allowed prefixes
	DropMalformed                          // bond: inner packet is not a valid IPv4/IPv6 packet
	DropTUNWrite                           // bond: the TUN refused the packet
	DropQueueFull                          // path: dropped from a full send queue, the oldest of the lowest priority
	DropExpired                            // path: waited longer than MaxQueueDelay
	DropDeadline                           // path: waited past the deadline_ms of its rule
	DropTooLarge                           // path: above the connection's datagram size limit
	DropSendError                          // path: SendDatagram failed (connection closing)
	DropReceiveQueueFull                   // path: dropped inside quic-go's receive queue
	DropNoRoute                            // concentrator: no edge's allowed prefixes hold the destination
	DropBadFlowTag                         // bond: a DATA payload with FlagFlow whose flow tag is malformed
	DropObjectLost                         // path: the rest of a (non-key) video frame that lost a packet in the queue
	DropSuspect                            // path: handed to quic-go after the peer was last heard, on a path that then turned SUSPECT or whose connection then ended (liveness.go): presumed lost
	DropStale                              // path: received older than StaleAfter against the path's one-way-delay baseline (stale.go)
	DropBlackHole                          // path: handed to quic-go and lost in a path MTU black hole before bondd detected it (pmtu.go)

	numDropReasons // not a reason: the number of them
)

// Where a drop reason is counted.
const (
	scopeBond = 1 << iota
	scopePath
	scopeConc
)

// dropInfo is each reason's name and scope.
var dropInfo = [numDropReasons]struct {
	name  string
	scope uint8
}{
	DropNoPath:           {"no_path", scopeBond},
	DropOversize:         {"oversize", scopeBond},
	DropLinkLocal:        {"link_local", scopeBond | scopeConc},
	DropParitySkipped:    {"parity_skipped", scopeBond},
	DropBadHeader:        {"bad_header", scopeBond},
	DropBadFEC:           {"bad_fec", scopeBond},
	DropDuplicate:        {"duplicate", scopeBond},
	DropTooOld:           {"too_old", scopeBond},
	DropSpoofed:          {"spoofed", scopeBond},
	DropMalformed:        {"malformed", scopeBond},
	DropTUNWrite:         {"tun_write", scopeBond},
	DropQueueFull:        {"queue_full", scopePath},
	DropExpired:          {"expired", scopePath},
	DropDeadline:         {"deadline", scopePath},
	DropTooLarge:         {"too_large", scopePath},
	DropSendError:        {"send_error", scopePath},
	DropReceiveQueueFull: {"receive_queue_full", scopePath},
	DropNoRoute:          {"no_route", scopeConc},
	DropBadFlowTag:       {"bad_flow_tag", scopeBond},
	DropObjectLost:       {"object_lost", scopePath},
	DropSuspect:          {"suspect", scopePath},
	DropStale:            {"stale", scopePath},
	DropBlackHole:        {"black_hole", scopePath},
}

// String returns the reason's name in status, metrics and docs, like
// "queue_full".
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropInfo[r].name
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// MarshalText implements encoding.TextMarshaler: the name, as a JSON key.
func (r DropReason) MarshalText() ([]byte, error) {
	if r >= numDropReasons {
		return nil, fmt.Errorf("tunnel: drop reason %d unknown", uint8(r))
	}
	return []byte(dropInfo[r].name), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it returns an error
// for a name this build does not know.
func (r *DropReason) UnmarshalText(b []byte) error {
	for i := range dropInfo {
		if dropInfo[i].name == string(b) {
			*r = DropReason(i)
			return nil
		}
	}
	return fmt.Errorf("tunnel: unknown drop reason %q", b)
}

// dropReasons returns the reasons counted in scope, in enum order.
func dropReasons(scope uint8) []DropReason {
	var out []DropReason
	for r := range numDropReasons {
		if dropInfo[r].scope&scope != 0 {
			out = append(out, r)
		}
	}
	return out
}

// Reasons of each scope, in order, for status and metrics.
var (
	// BondDropReasons are the reasons counted per bond (BondStats.Drops).
	BondDropReasons = dropReasons(scopeBond)
	// PathDropReasons are the reasons counted per path (PathStats.Drops).
	PathDropReasons = dropReasons(scopePath)
)

// DropCounts are drops by reason, in packets; a snapshot holds every
// reason of its scope, zeros included. In JSON an object keyed by the
// reason names.
type DropCounts map[DropReason]uint64

// UnmarshalJSON reads the object json.Marshal writes (reason names as
// keys, through MarshalText), skipping reason names this build does not
// know (a newer daemon's), so that a status client reads what it can.
func (d *DropCounts) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = make(DropCounts, len(m))
	for name, n := range m {
		var r DropReason
		if r.UnmarshalText([]byte(name)) == nil {
			(*d)[r] = n
		}
	}
	return nil
}

// dropCounters count drops by reason; safe for concurrent use and
// allocation-free.
type dropCounters [numDropReasons]atomic.Uint64

func (c *dropCounters) add(r DropReason)            { c[r].Add(1) }
func (c *dropCounters) addN(r DropReason, n uint64) { c[r].Add(n) }
func (c *dropCounters) get(r DropReason) uint64     { return c[r].Load() }

// snapshot returns the counts of the reasons in reasons.
func (c *dropCounters) snapshot(reasons []DropReason) DropCounts {
	out := make(DropCounts, len(reasons))
	for _, r := range reasons {
		out[r] = c[r].Load()
	}
	return out
}
