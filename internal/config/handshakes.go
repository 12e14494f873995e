package config

import "go.yaml.in/yaml/v3"

// HandshakesConfig bounds the new path connections a concentrator takes
// on (key concentrator.handshakes; docs/config.md, docs/operations.md
// "Handshakes and restarts"). Every field is optional: 0 (or absent)
// takes the tunnel's default (tunnel.HandshakeOptions), -1 turns that
// bound off.
type HandshakesConfig struct {
	// RatePerS is the node's new path connections per second; above it an
	// attempt is answered "busy" at once (0: 500).
	RatePerS float64
	// Burst is how many connections above the rate are taken at once (0: 100).
	Burst int
	// PerSourcePerS is the new path connections per second from one IP
	// address (0: 20).
	PerSourcePerS float64
	// PerSourceBurst is the burst of one address (0: 40).
	PerSourceBurst int
	// RetryAbove is the number of handshakes in progress above which new
	// attempts must first pass a QUIC Retry (0: 256).
	RetryAbove int
}

var handshakesKeys = []string{"rate_per_s", "burst", "per_source_per_s", "per_source_burst", "retry_above"}

func (d *configDecoder) handshakes(n *yaml.Node) *HandshakesConfig {
	f := d.fields(n, "concentrator.handshakes", handshakesKeys)
	if f == nil {
		return nil
	}
	const p = "concentrator.handshakes."
	return &HandshakesConfig{
		RatePerS:       d.float(f["rate_per_s"], p+"rate_per_s", "a number of connections per second, like 500, or -1 for no limit"),
		Burst:          d.integer(f["burst"], p+"burst", "an integer number of connections"),
		PerSourcePerS:  d.float(f["per_source_per_s"], p+"per_source_per_s", "a number of connections per second, like 20, or -1 for no limit"),
		PerSourceBurst: d.integer(f["per_source_burst"], p+"per_source_burst", "an integer number of connections"),
		RetryAbove:     d.integer(f["retry_above"], p+"retry_above", "an integer number of handshakes, or -1"),
	}
}

func (h *HandshakesConfig) validate(v *configValidator) {
	const p = "concentrator.handshakes."
	if h.RatePerS < 0 && h.RatePerS != -1 {
		v.errorf(p+"rate_per_s", "expected a positive number of connections per second, or -1 for no limit, got %g", h.RatePerS)
	}
	if h.PerSourcePerS < 0 && h.PerSourcePerS != -1 {
		v.errorf(p+"per_source_per_s", "expected a positive number of connections per second, or -1 for no limit, got %g", h.PerSourcePerS)
	}
	if h.Burst < 0 {
		v.errorf(p+"burst", "expected a positive number of connections, got %d", h.Burst)
	}
	if h.PerSourceBurst < 0 {
		v.errorf(p+"per_source_burst", "expected a positive number of connections, got %d", h.PerSourceBurst)
	}
	if h.RetryAbove < -1 {
		v.errorf(p+"retry_above", "expected a positive number of handshakes, or -1, got %d", h.RetryAbove)
	}
}
