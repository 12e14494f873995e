package emu

import (
	"fmt"
	"time"
)

// BitRate is a link rate in bits per second.
type BitRate int64

// Common rates.
const (
	BitPerSecond BitRate = 1
	Kbps                 = 1000 * BitPerSecond
	Mbps                 = 1000 * Kbps
	Gbps                 = 1000 * Mbps
)

// String formats the rate with a unit, e.g. "20 Mbit/s".
func (r BitRate) String() string {
	switch {
	case r >= Gbps:
		return fmt.Sprintf("%.4g Gbit/s", float64(r)/float64(Gbps))
	case r >= Mbps:
		return fmt.Sprintf("%.4g Mbit/s", float64(r)/float64(Mbps))
	case r >= Kbps:
		return fmt.Sprintf("%.4g kbit/s", float64(r)/float64(Kbps))
	}
	return fmt.Sprintf("%d bit/s", int64(r))
}

// Mbit returns the rate in Mbit/s.
func (r BitRate) Mbit() float64 { return float64(r) / float64(Mbps) }

// txTime returns how long sizeBytes take at rate r, rounded up to the ns.
func (r BitRate) txTime(sizeBytes int) time.Duration {
	ns := (int64(sizeBytes)*8*int64(time.Second) + int64(r) - 1) / int64(r)
	return time.Duration(ns)
}
