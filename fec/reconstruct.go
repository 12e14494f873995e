package fec

// Reconstruction (stage 3 of the receive side, see decoder.go): once a
// block holds any k of its shards, its missing data packets are solved for
// and handed to the caller through Recovered.

// Recovered receives the data packets one AddData or AddParity call
// reconstructs, in the batch shape of tun.Device: packet i is written at
// Bufs[i][Offset:Offset+Sizes[i]]. Use one per calling goroutine; each call
// resets Sizes and Indexes. After a call the caller owns the filled buffers
// (Bufs[:len(Sizes)]) and should swap in fresh ones before the next call.
type Recovered struct {
	// Bufs are the caller's buffers, each with capacity ≥ Offset +
	// MaxPacketLen. Reconstructed packets beyond len(Bufs) are counted in
	// RecoveredDropped, so supply as many as the largest r in use.
	Bufs   [][]byte
	Offset int // where each packet starts in its buffer, bytes
	// BufLen, when > 0, lets the decoder add buffers of Offset + BufLen
	// bytes to Bufs as reconstructions need them, up to MaxK: Bufs may
	// start empty, so a receive routine that never reconstructs holds
	// none. Each is allocated once and reused; with BufLen 0 Bufs is all
	// there is.
	BufLen int

	Sizes   []int // out: packet lengths, bytes
	Indexes []int // out: each packet's index in its block
	Ref     Ref   // out: the block (Class, Block, K, R, MaxLen) when len(Sizes) > 0
}

// Packet returns reconstructed packet i.
func (rc *Recovered) Packet(i int) []byte {
	return rc.Bufs[i][rc.Offset : rc.Offset+rc.Sizes[i]]
}

func (rc *Recovered) reset() {
	if rc != nil {
		rc.Sizes, rc.Indexes = rc.Sizes[:0], rc.Indexes[:0]
	}
}

// progressLocked finishes e if all its data are delivered, else
// reconstructs when enough shards are in.
func (d *Decoder) progressLocked(cs *classState, e *entry, rec *Recovered) {
	k := int(e.k)
	if k == 0 {
		if e.nData == e.kData {
			d.finishLocked(cs, e)
		}
		return
	}
	if int(e.nData) >= k {
		d.finishLocked(cs, e)
		return
	}
	if int(e.nStored)+int(e.nPar) < k {
		return
	}
	d.reconstructLocked(cs, e, rec)
	if int(e.nData) >= k {
		cs.stats.BlocksRecovered++
		d.releaseLocked(e)
		e.state = stDone
	} else { // a corrupt reconstruction: give up on the rest
		d.closeLocked(e, false)
	}
}

// reconstructLocked solves for the data shards e does not hold and hands
// out those not yet delivered. e holds at least k shards.
//
// With A the parity rows of the code, the e missing data D_m satisfy, for
// any e held parity shards P_j:
//
//	P_j = Σ_{i held} A[j][i]·D_i + Σ_{m missing} A[j][m]·D_m
//
// so D_m = Σ_a B⁻¹[m][a]·(P_{j_a} + Σ_{i held} A[j_a][i]·D_i) with B the
// e×e matrix A[j_a][m], which is invertible because the code is MDS. Each
// D_m is accumulated in one pass over the held shards.
func (d *Decoder) reconstructLocked(cs *classState, e *entry, rec *Recovered) {
	k, maxLen := int(e.k), int(e.maxLen)
	shardLen := maxLen + ShardOverhead
	a, err := parityMatrix(k)
	if err != nil {
		return
	}
	miss := d.missing[:0]
	for i := range k {
		if e.slot[i] == 0 {
			miss = append(miss, i)
		} else { // zero-pad the held data to the shard length
			b := d.bufs[e.slot[i]-1]
			clear(b[ShardOverhead+prefix(b) : shardLen])
		}
	}
	ne := len(miss)
	par := d.parIdx[:0]
	for j := k; j < k+int(e.r) && len(par) < ne; j++ {
		if e.slot[j] != 0 {
			par = append(par, j)
		}
	}
	if len(par) < ne {
		return
	}
	b := d.mat[:ne*ne]
	for ai, j := range par {
		for c, m := range miss {
			b[ai*ne+c] = a[(j-k)*k+m]
		}
	}
	if !gfInvert(b, ne, d.work) {
		cs.stats.Bad++
		cs.stats.Reasons[ReasonCorrupt]++
		return
	}
	if rec != nil {
		rec.Ref = Ref{Class: e.class, Block: e.block, K: k, R: int(e.r), MaxLen: maxLen}
	}
	one := d.one[:]
	out := d.out[:shardLen]
	for c, m := range miss {
		if e.delivered(m) { // arrived but was not kept for lack of a buffer
			continue
		}
		inv := b[c*ne : c*ne+ne]
		clear(out)
		for i := range k {
			if e.slot[i] == 0 {
				continue
			}
			var coef byte
			for ai, j := range par {
				coef ^= gfMul(inv[ai], a[(j-k)*k+i])
			}
			mulAdd(d.kernel, coef, d.bufs[e.slot[i]-1][:shardLen], out, one)
		}
		for ai, j := range par {
			mulAdd(d.kernel, inv[ai], d.bufs[e.slot[j]-1][:shardLen], out, one)
		}
		n := prefix(out)
		if n > maxLen {
			cs.stats.Bad++
			cs.stats.Reasons[ReasonCorrupt]++
			continue
		}
		e.deliver(m)
		e.rebuilt[m>>6] |= 1 << (m & 63)
		e.rebuiltT = d.now
		cs.stats.Recovered++
		if rec != nil && rec.BufLen > 0 && rec.Offset >= 0 && len(rec.Sizes) == len(rec.Bufs) && len(rec.Bufs) < MaxK {
			rec.Bufs = append(rec.Bufs, make([]byte, rec.Offset+max(rec.BufLen, n))) // once per slot
		}
		if rec == nil || rec.Offset < 0 || len(rec.Sizes) >= len(rec.Bufs) || cap(rec.Bufs[len(rec.Sizes)]) < rec.Offset+n {
			cs.stats.RecoveredDropped++
			continue
		}
		x := len(rec.Sizes)
		copy(rec.Bufs[x][rec.Offset:rec.Offset+n], out[ShardOverhead:ShardOverhead+n])
		rec.Sizes = append(rec.Sizes, n)
		rec.Indexes = append(rec.Indexes, m)
	}
}
