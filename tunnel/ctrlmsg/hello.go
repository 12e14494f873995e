package ctrlmsg

import (
	"errors"
	"fmt"
)

// Types of the handshake that opens every control stream.
const (
	TypeHello      = "hello"
	TypeHelloReply = "hello_reply"
)

// Hello announces one path connection of an edge's bond: the
// first message on its control stream.
type Hello struct {
	Type    string `json:"type"` // TypeHello
	Version int    `json:"version"`
	EdgeID  string `json:"edge_id"` // 1..MaxNameLen bytes
	BondID  uint64 `json:"bond_id"` // random per edge start; a new id restarts the sequence space
	Path    string `json:"path"`    // the uplink name, 1..MaxNameLen bytes
	// Lane is 0 (omitted): a path has one QUIC connection. Edges from
	// before that numbered an uplink's several connections (lanes) from
	// 0; the field stays for them, and the receiver bounds it (Check).
	Lane   int               `json:"lane,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Token  []byte            `json:"token,omitempty"`
	// Control lists the control-plane capabilities the edge offers (Caps;
	// MoMQ A.2 ENABLE_MOMQ). Unknown names are ignored. At most MaxCaps
	// entries of MaxCapLen bytes.
	Control []string `json:"control,omitempty"`
	// LEO is the path's LEO reconfiguration schedule, when the uplink has
	// one (policy.LEOReconf): the concentrator applies it to the path's
	// downlink (the rules' leo_state, the hold around each second). nil:
	// none. A concentrator that predates it ignores it.
	LEO *LEOSchedule `json:"leo,omitempty"`
}

// LEOSchedule is a path's LEO reconfiguration schedule on the wire. Zero
// fields take the defaults of policy.LEOReconf.
type LEOSchedule struct {
	// Seconds are the scheduled seconds of each UTC minute, 0..59, at
	// most MaxLEOSeconds of them.
	Seconds []int `json:"seconds,omitempty"`
	// WindowMs is the danger zone's half-width, ms: 0 (default) or
	// 1..MaxLEOWindowMs.
	WindowMs int `json:"window_ms,omitempty"`
	// HoldMs is the hold after each second, ms: 0 (default), -1 (none)
	// or 1..MaxLEOHoldMs.
	HoldMs int `json:"hold_ms,omitempty"`
}

// Bounds of a LEOSchedule (those of policy.LEOReconf).
const (
	MaxLEOSeconds  = 60
	MaxLEOWindowMs = 7500
	MaxLEOHoldMs   = 1000
)

// check returns an error naming the first field of l out of bounds.
func (l *LEOSchedule) check() error {
	switch {
	case len(l.Seconds) > MaxLEOSeconds:
		return fmt.Errorf("hello: %d LEO seconds, at most %d", len(l.Seconds), MaxLEOSeconds)
	case l.WindowMs < 0 || l.WindowMs > MaxLEOWindowMs:
		return fmt.Errorf("hello: LEO window %d ms outside 0..%d", l.WindowMs, MaxLEOWindowMs)
	case l.HoldMs < -1 || l.HoldMs > MaxLEOHoldMs:
		return fmt.Errorf("hello: LEO hold %d ms outside -1..%d", l.HoldMs, MaxLEOHoldMs)
	}
	for _, s := range l.Seconds {
		if s < 0 || s > 59 {
			return fmt.Errorf("hello: LEO second %d outside 0..59", s)
		}
	}
	return nil
}

// HelloReply accepts or refuses a path. A refusal does not say why.
type HelloReply struct {
	Type  string `json:"type"` // TypeHelloReply
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	MTU   int    `json:"mtu,omitempty"` // the concentrator's TUN MTU, bytes
	// Control lists the capabilities of Hello.Control the concentrator
	// accepts on this connection; a control message of any other is a
	// protocol violation.
	Control []string `json:"control,omitempty"`
}

// Check validates the fields of a hello received from the network against
// the wire-format version and the number of lanes the receiver speaks: lane
// in 0..lanes-1, names and labels within the limits. It returns an error
// naming the first field that fails.
func (h *Hello) Check(version, lanes int) error {
	switch {
	case h.Version != version:
		return fmt.Errorf("hello version %d, want %d", h.Version, version)
	case h.EdgeID == "" || len(h.EdgeID) > MaxNameLen:
		return errors.New("hello: bad edge id")
	case h.Path == "" || len(h.Path) > MaxNameLen:
		return errors.New("hello: bad path name")
	case h.Lane < 0 || h.Lane >= lanes:
		return fmt.Errorf("hello: lane %d outside 0..%d", h.Lane, lanes-1)
	case len(h.Labels) > MaxLabels:
		return fmt.Errorf("hello: %d labels, at most %d", len(h.Labels), MaxLabels)
	case len(h.Control) > MaxCaps:
		return fmt.Errorf("hello: %d capabilities, at most %d", len(h.Control), MaxCaps)
	}
	for _, c := range h.Control {
		if c == "" || len(c) > MaxCapLen {
			return errors.New("hello: capability empty or too long")
		}
	}
	for k, v := range h.Labels {
		if k == "" || len(k) > MaxLabelKey || len(v) > MaxLabelValue {
			return errors.New("hello: label key or value out of bounds")
		}
	}
	if h.LEO != nil {
		return h.LEO.check()
	}
	return nil
}
