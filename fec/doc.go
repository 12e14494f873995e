// Package fec is bondd's adaptive forward error correction: systematic
// Reed–Solomon blocks over whole datagram payloads, a parity count sized to
// the expected loss of each block, and a per-path loss estimator.
//
// It follows paper 1 ("Scheduler-agnostic adaptive FEC for multipath QUIC
// datagrams", §3–4) with one
// bondd addition, a time budget per block. The package is a leaf: it speaks
// in numbers (path indexes, loss rates, block ids) and imports no bondd
// package.
//
// # Pieces
//
//   - LossIntervals: the per-path loss estimate p_i, the loss-interval
//     method of TFRC (RFC 5348 §5.4) driven by QUIC loss detection events.
//   - ParityCount: r = min(k, ceil(α·Σ k_i·p_i)), paper 1 §4.4.
//   - Encoder: one per FEC class on the sending side. Data packets leave at
//     once (the code is systematic); the encoder keeps a copy of each and
//     computes the parity shards when the block closes, on k packets or on
//     its time budget.
//   - Decoder: one per bond on the receiving side. A bounded table of the
//     blocks in flight; it keeps copies of arriving data and parity, and
//     reconstructs the missing data packets as soon as any k of a block's
//     k+r packets are in.
//
// # Send path (one Encoder per FEC class)
//
//	ref, full, ok := enc.Add(now, pkt, path) // copies pkt; never blocks
//	// send pkt now; if ok, with the FEC header fields of ref
//	if full {
//		rd.Loss = lossRates(rd.Loss[:0]) // p_i per path index, from LossIntervals.Rate
//		if enc.Seal(ref.Block, &rd, &par) {
//			for j, s := range par.Shards { send(par.ShardRef(j), s) }
//		}
//	}
//	// From a timer at enc.Deadline(), with its own rd2 and par2:
//	if enc.Flush(now, &rd2, &par2) { /* send par2.Shards likewise */ }
//
// # Receive path (one Decoder per bond)
//
//	if dec.AddData(now, ref, pkt, &rec).Deliver() { // a DATA datagram
//		deliver(pkt)
//	}
//	dec.AddParity(now, ref, shard, &rec) // a PARITY datagram
//	for i := range rec.Sizes {           // after either call
//		deliver(rec.Packet(i))
//	}
//
// Either call may reconstruct packets into rec. Data is never held back:
// the decoder only keeps copies for reconstruction.
//
// # Shards and lengths
//
// A block's shards are ShardOverhead + MaxLen bytes long, MaxLen being the
// block's longest data packet: each data packet is coded as a 2-byte
// big-endian length, the packet, and zero padding. The prefix is covered by
// the parity, so a reconstructed packet carries its own exact length without
// trusting anything inside the packet (an IP length field would only work for
// IP), and a prefix larger than MaxLen exposes a corrupt reconstruction. It
// exists only inside the code: data packets go on the wire unchanged, and a
// parity datagram is ShardOverhead bytes longer than the block's longest data
// packet.
//
// # Concurrency
//
// Encoder and Decoder each guard their state with one mutex, so Add, Seal
// and Flush (or AddData, AddParity and Expire) may come from different
// goroutines. LossIntervals counts sent packets with an atomic add, takes a
// mutex only on a loss report, and publishes its rate through an atomic, so
// OnSent and Rate never block. ParityCount is a pure function.
//
// # Allocation
//
// In steady state nothing allocates per packet or per block: encoders for
// each (k, r) are created once and cached, the encoder's copies and the
// decoder's shard buffers are reused, and reconstruction runs on
// preallocated scratch (see docs/fec.md for how it avoids the allocations of
// reedsolomon's ReconstructData).
package fec
