package fec

import (
	"fmt"
	"testing"
	"time"
)

// Benchmarks are named by geometry k×r×shard bytes; one op is one block,
// and bytes/s count data payload (k × shard bytes) only.

func benchEncode(b *testing.B, k, r, size int) {
	p := newPipeline(b, k, r, size, nil)
	p.send()
	b.SetBytes(int64(k * size))
	b.ReportAllocs()
	for b.Loop() {
		p.send()
	}
}

func BenchmarkEncode20x1x1300(b *testing.B) { benchEncode(b, 20, 1, 1300) }
func BenchmarkEncode20x2x1300(b *testing.B) { benchEncode(b, 20, 2, 1300) }
func BenchmarkEncode20x3x1300(b *testing.B) { benchEncode(b, 20, 3, 1300) }
func BenchmarkEncode20x4x1300(b *testing.B) { benchEncode(b, 20, 4, 1300) }

// benchDecode decodes one block per op with the given data lost, so every
// op reconstructs len(lose) packets (the worst case when len(lose) == r).
func benchDecode(b *testing.B, k, r, size int, lose []int) {
	p := newPipeline(b, k, r, size, lose)
	p.send()
	sent := p.refs[0].Block
	p.receive()
	b.SetBytes(int64(k * size))
	b.ReportAllocs()
	for b.Loop() {
		// Re-deliver the same encoded block under a new id.
		sent++
		for i := range p.refs {
			p.refs[i].Block = sent
		}
		p.par.Ref.Block = sent
		if p.receive() != len(lose) {
			b.Fatal("not recovered")
		}
	}
}

func BenchmarkDecode20x4x1300(b *testing.B)       { benchDecode(b, 20, 4, 1300, []int{0, 5, 11, 19}) }
func BenchmarkDecode20x1x1300(b *testing.B)       { benchDecode(b, 20, 1, 1300, []int{7}) }
func BenchmarkDecode20x4x1300NoLoss(b *testing.B) { benchDecode(b, 20, 4, 1300, nil) }

// BenchmarkEncodeDecode is the target figure: a block encoded and, with r
// data packets lost, decoded, on one goroutine. Gbit/s is payload.
func BenchmarkEncodeDecode(b *testing.B) {
	for r := 1; r <= 4; r++ {
		lose := []int{0, 5, 11, 19}[:r]
		b.Run(fmt.Sprintf("20x%dx1300", r), func(b *testing.B) {
			p := newPipeline(b, 20, r, 1300, lose)
			p.send()
			p.receive()
			b.SetBytes(20 * 1300)
			b.ReportAllocs()
			for b.Loop() {
				p.send()
				if p.receive() != r {
					b.Fatal("not recovered")
				}
			}
			b.ReportMetric(float64(b.N)*20*1300*8/b.Elapsed().Seconds()/1e9, "Gbit/s")
		})
	}
}

// BenchmarkAddData1300 is the receiver's per-packet cost with no loss.
func BenchmarkAddData1300(b *testing.B) {
	d := mustDecoder(b, DecoderOptions{})
	pkt := make([]byte, 1300)
	ref := Ref{K: 20}
	b.SetBytes(1300)
	b.ReportAllocs()
	for b.Loop() {
		d.AddData(t0, ref, pkt, nil)
		if ref.Index++; ref.Index == 20 {
			ref.Index = 0
			ref.Block++
		}
	}
}

func BenchmarkParityCount(b *testing.B) {
	ki, pi := []int{7, 7, 6}, []float64{0.02, 0.05, 0.005}
	b.ReportAllocs()
	for b.Loop() {
		ParityCount(20, ki, pi, 2)
	}
}

func BenchmarkLossIntervalsOnSent(b *testing.B) {
	var l LossIntervals
	l.OnLoss(t0, time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		l.OnSent(1)
		_ = l.Rate()
	}
}
