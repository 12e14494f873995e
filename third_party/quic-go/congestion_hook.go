package quic

import "github.com/quic-go/quic-go/internal/congestion"

// congestionHook returns what installs Config.CongestionControl's
// controller on the connection (congestion.Hook).
func (c *Conn) congestionHook() func(congestion.SendAlgorithmWithDebugInfos) congestion.SendAlgorithmWithDebugInfos {
	f := c.config.CongestionControl
	if f == nil {
		return nil
	}
	return func(def congestion.SendAlgorithmWithDebugInfos) congestion.SendAlgorithmWithDebugInfos {
		s := congestion.Hook(f, c.ctx, def, c.rttStats)
		c.datagramQueue.observer = congestion.ObserverOf(s)
		return s
	}
}

// dropped tells the observer of a DATAGRAM frame of n bytes dropped.
func (h *datagramQueue) dropped(received bool, n int) {
	if h.observer != nil {
		h.observer.OnDatagramDropped(received, int64(n))
	}
}

// setLens sets the queues' bounds; n <= 0 keeps the default.
func (h *datagramQueue) setLens(send, rcv int) {
	if send > 0 {
		h.sendLen = send
	}
	if rcv > 0 {
		h.rcvLen = rcv
	}
}
