package policy

import (
	"testing"
	"time"
)

// BenchmarkRateEstimatorUpdate is the sender's cost per feedback report
// (one path, LEO marker set so the window check runs).
func BenchmarkRateEstimatorUpdate(b *testing.B) {
	e := NewRateEstimator(RateConfig{LEO: &LEOReconf{}})
	now := modelStart
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		now = now.Add(50 * time.Millisecond)
		r := RateReport{Start: i * 50_000, End: (i + 1) * 50_000, Bytes: 60_000, Datagrams: 50, Lost: 1, OWDMin: 20_000, OWDMean: 21_000 + int64(i%7)*500}
		e.Update(now, &r, SendStats{SentBytes: 60_000, BacklogBytes: 1, SRTT: 40 * time.Millisecond})
	}
}

// BenchmarkPacer is the sender loop's cost per packet: Delay, then
// Consume when it may go.
func BenchmarkPacer(b *testing.B) {
	var p Pacer
	now := modelStart
	p.SetRate(now, 1.25e7, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(96 * time.Microsecond)
		if p.Delay(now, 1200) == 0 {
			p.Consume(now, 1200)
		}
	}
}

// BenchmarkRateMeter is the receiver's cost per datagram.
func BenchmarkRateMeter(b *testing.B) {
	var m RateMeter
	var seq uint32
	b.ReportAllocs()
	for b.Loop() {
		seq++
		m.OnDatagram(uint64(seq)*100, uint64(seq)*100-40_000, seq, 1200)
	}
}

// BenchmarkDeliveryEstimate is the scheduler's cost per path per packet.
func BenchmarkDeliveryEstimate(b *testing.B) {
	b.ReportAllocs()
	var d time.Duration
	for b.Loop() {
		d += DeliveryEstimate(12_000, 1e6, 20*time.Millisecond, 0.02, DefaultLossPenalty)
	}
	_ = d
}
