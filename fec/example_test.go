package fec_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/bondd/bondd/fec"
)

// The parity count of paper 1 §4.4 for a block of 20 spread over three
// paths.
func ExampleParityCount() {
	kPerPath := []int{7, 7, 6}
	loss := []float64{0.02, 0.05, 0.005}
	fmt.Printf("L̂ = %.2f, r = %d\n", fec.ExpectedLoss(kPerPath, loss), fec.ParityCount(20, kPerPath, loss, 2))
	// Output: L̂ = 0.52, r = 2
}

// A per-path loss estimate fed from the sender and QUIC's loss detector.
func ExampleLossIntervals() {
	var path fec.LossIntervals
	now := time.Unix(0, 0)
	rtt := 40 * time.Millisecond
	for range 5 {
		path.OnSent(100) // on the sending goroutine
		now = now.Add(time.Second)
		path.OnLoss(now, rtt) // on quic-go's tracer goroutine
	}
	fmt.Printf("p = %.3f\n", path.Rate())
	// Output: p = 0.010
}

// One block from the sender's Add and Seal to the receiver's
// reconstruction of two lost packets.
func ExampleDecoder() {
	enc, _ := fec.NewEncoder(fec.EncoderOptions{K: 4})
	dec, _ := fec.NewDecoder(fec.DecoderOptions{})
	now := time.Unix(0, 0)

	pkts := [][]byte{[]byte("alpha"), []byte("bravo!"), []byte("charlie"), []byte("delta")}
	refs := make([]fec.Ref, len(pkts))
	for i, p := range pkts {
		refs[i], _, _ = enc.Add(now, p, 0) // send p with refs[i] in its header
	}
	par := &fec.Parity{Bufs: [][]byte{make([]byte, 1502), make([]byte, 1502)}}
	rd := &fec.Redundancy{Loss: []float64{0.05}, Alpha: 2} // L̂ = 0.2, r = ⌈0.4⌉ = 1
	rd.Loss[0] = 0.2                                       // a bad moment: L̂ = 0.8, r = 2
	enc.Seal(refs[0].Block, rd, par)

	// Packets 1 and 3 are lost on the way.
	rec := &fec.Recovered{Bufs: [][]byte{make([]byte, 1500), make([]byte, 1500)}}
	for _, i := range []int{0, 2} {
		dec.AddData(now, refs[i], pkts[i], rec)
	}
	for j, shard := range par.Shards {
		dec.AddParity(now, par.ShardRef(j), shard, rec)
		for x := range rec.Sizes {
			fmt.Printf("recovered %d: %s %v\n", rec.Indexes[x], rec.Packet(x), bytes.Equal(rec.Packet(x), pkts[rec.Indexes[x]]))
		}
	}
	// Output:
	// recovered 1: bravo! true
	// recovered 3: delta true
}
