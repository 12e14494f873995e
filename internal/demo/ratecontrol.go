package demo

import (
	"fmt"

	"github.com/bondd/bondd/tunnel"
)

// Rate-control settings of a testbed (BedOptions.RateControl), as the
// config key rate_control and the --rate-control flag spell them.
const (
	// RateControlBondd: bondd decides each path's rate
	// (tunnel.RateControlBondd).
	RateControlBondd = tunnel.RateControlBondd
	// RateControlQUIC: quic-go's own congestion control decides, as before
	// bondd had a rate controller (tunnel.RateControlQUIC).
	RateControlQUIC = tunnel.RateControlQUIC
)

// ValidateRateControl reports whether s is a rate-control setting: "" (the
// bond's default), RateControlBondd or RateControlQUIC. The error names the
// accepted values.
func ValidateRateControl(s string) error {
	switch s {
	case "", RateControlBondd, RateControlQUIC:
		return nil
	}
	return fmt.Errorf("rate control %q: expected %s or %s", s, RateControlBondd, RateControlQUIC)
}

// applyRateControl copies the rate-control setting rc (validated by
// ValidateRateControl) into the edge's and the concentrator's options
// (tunnel.PathOptions.RateControl), either of which may be nil. It is the
// one place where a testbed hands rate_control to the bond: both testbeds
// (netns.go, inprocess.go) call it on the options they build. "" leaves
// the options as they are (the tunnel's default, quic-go's congestion
// control).
func applyRateControl(rc string, e *tunnel.EdgeOptions, c *tunnel.ConcentratorOptions) error {
	if err := ValidateRateControl(rc); err != nil {
		return err
	}
	if rc == "" {
		return nil
	}
	if e != nil {
		e.Paths.RateControl = rc
	}
	if c != nil {
		c.Paths.RateControl = rc
	}
	return nil
}
