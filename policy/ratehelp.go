package policy

import (
	"math"
	"time"
)

// DefaultLossPenalty is the delivery time [DeliveryEstimate] charges for
// each expected loss of an unprotected packet: about a TCP minimum RTO
// (RFC 6298 §2.4 allows 1 s; Linux uses 200 ms), what an inner flow pays
// to repair it.
const DefaultLossPenalty = 250 * time.Millisecond

// OneWayDelay returns the propagation-plus-queue delay to use for a path
// in [DeliveryEstimate]: half the minimum RTT plus the queueing delay the
// receiver measured ([RateEstimate.QueueDelay]); half the smoothed RTT
// before the first minimum-RTT sample. The measured base one-way delay
// itself cannot be used: it includes the unknown offset between the
// hosts' clocks.
func OneWayDelay(minRTT, srtt, queue time.Duration) time.Duration {
	if minRTT <= 0 {
		return max(srtt, 0) / 2
	}
	return minRTT/2 + max(queue, 0)
}

// DeliveryEstimate returns the expected time for a packet queued now on a
// path to reach the peer: the queued bytes ahead of it drained at the
// path's target rate (bytes/s), plus the one-way delay, plus, for a path
// that loses a fraction loss (0–1) of its datagrams, lossPenalty for each
// expected loss before a copy arrives (the geometric number of attempts,
// loss/(1−loss)). A path losing 50 % is thus charged one lossPenalty more
// than a clean one and is not chosen for unprotected traffic while a
// cleaner path has less than lossPenalty of queue. A rate ≤ 0 counts the
// queue as free; loss ≥ 0.999 saturates at 1000 penalties. Allocation-free.
func DeliveryEstimate(queuedBytes int, rate float64, owd time.Duration, loss float64, lossPenalty time.Duration) time.Duration {
	d := float64(owd)
	if rate > 0 && queuedBytes > 0 {
		d += float64(queuedBytes) / rate * 1e9
	}
	if loss > 0 {
		loss = min(loss, 0.999)
		d += loss / (1 - loss) * float64(lossPenalty)
	}
	return time.Duration(min(d, float64(math.MaxInt64/2)))
}
