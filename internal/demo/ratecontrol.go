package demo

import (
	"errors"
	"fmt"

	"github.com/bondd/bondd/tunnel"
)

// Rate-control settings of a testbed (BedOptions.RateControl), as the
// config key rate_control and the --rate-control flag spell them.
const (
	// RateControlBondd: bondd decides each path's rate (issue: per-path
	// rate control).
	RateControlBondd = "bondd"
	// RateControlQUIC: quic-go's own congestion control decides, as before
	// bondd had a rate controller.
	RateControlQUIC = "quic"
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

// errNoBonddRateControl is returned for RateControlBondd while package
// tunnel has no rate controller to switch on.
var errNoBonddRateControl = errors.New("rate control bondd: this build's tunnel has no per-path rate controller; only quic (quic-go's congestion control) is available")

// applyRateControl copies the rate-control setting rc (validated by
// ValidateRateControl) into the edge's and the concentrator's options,
// either of which may be nil. It is the one place where a testbed hands
// rate_control to the bond: both testbeds (netns.go, inprocess.go) call it
// on the options they build. "" and RateControlQUIC leave the options as
// they are (quic-go's congestion control, today's only behaviour);
// RateControlBondd returns errNoBonddRateControl until tunnel's options
// carry the setting, at which point this sets it on e and c.
func applyRateControl(rc string, e *tunnel.EdgeOptions, c *tunnel.ConcentratorOptions) error {
	if err := ValidateRateControl(rc); err != nil {
		return err
	}
	if rc == RateControlBondd {
		return errNoBonddRateControl
	}
	return nil
}
