package tunnel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bondd/bondd/fec"
)

// rsEv is one step of a resequencer scenario: at ms, a packet (flow, seq)
// arrives, or with flush the receive loop's timer fires.
type rsEv struct {
	at    int // ms since the start
	flow  uint16
	seq   uint32
	flush bool
}

func rsPayload(flow uint16, seq uint32) []byte { return fmt.Appendf(nil, "%d/%d", flow, seq) }

// rsRun plays evs into r and returns what the caller would write to the
// TUN, in order, as "flow/seq" strings.
func rsRun(t testing.TB, r *resequencer, wait time.Duration, evs []rsEv) []string {
	t.Helper()
	t0 := time.Unix(1_800_000_000, 0)
	var out []string
	drain := func() {
		for {
			buf, n, ok := r.pop()
			if !ok {
				return
			}
			out = append(out, string(buf[Headroom:Headroom+n]))
			putBuf(buf)
		}
	}
	for _, e := range evs {
		now := t0.Add(time.Duration(e.at) * time.Millisecond)
		if e.flush {
			r.flush(now)
			drain()
			continue
		}
		pkt := rsPayload(e.flow, e.seq)
		v := r.push(now, FlowTag{Flow: e.flow, Seq: e.seq, WaitMs: uint16(wait / time.Millisecond)}, pkt)
		if v == reseqDeliver {
			out = append(out, string(pkt))
		}
		drain()
	}
	return out
}

func seqs(flow uint16, s ...uint32) []string {
	var out []string
	for _, q := range s {
		out = append(out, string(rsPayload(flow, q)))
	}
	return out
}

func TestResequencer(t *testing.T) {
	const top = flowSeqMask // the last sequence number before the wrap
	tests := []struct {
		name string
		opts ReseqOptions
		evs  []rsEv
		want []string
		st   ReseqStats // only the counters set here are compared
	}{
		{"in order", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 1, false}, {2, 1, 2, false}},
			seqs(1, 0, 1, 2), ReseqStats{InOrder: 3}},
		{"reorder", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 1, 3, false}, {5, 1, 1, false}},
			seqs(1, 0, 1, 2, 3), ReseqStats{InOrder: 2, Held: 2, ReleasedInOrder: 2}},
		{"loss, released on timeout", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 1, 3, false},
			{50, 0, 0, true}, {101, 0, 0, true}, {102, 1, 4, false}},
			seqs(1, 0, 2, 3, 4), ReseqStats{InOrder: 2, Held: 2, ReleasedTimeout: 2, Skipped: 1}},
		{"late after timeout", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {120, 0, 0, true}, {130, 1, 1, false}, {131, 1, 3, false}},
			seqs(1, 0, 2, 1, 3), ReseqStats{InOrder: 2, Held: 1, ReleasedTimeout: 1, Skipped: 1, Late: 1}},
		{"two gaps, one timeout each", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {60, 1, 4, false},
			{101, 0, 0, true}, {159, 0, 0, true}, {161, 0, 0, true}},
			seqs(1, 0, 2, 4), ReseqStats{InOrder: 1, Held: 2, ReleasedTimeout: 2, Skipped: 2}},
		{"duplicate", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 1, 2, false}, {3, 1, 1, false}},
			seqs(1, 0, 1, 2), ReseqStats{InOrder: 2, Held: 1, ReleasedInOrder: 1, Duplicates: 1}},
		{"other flows never held", ReseqOptions{}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 2, 0, false}, {3, 2, 1, false}, {4, 1, 1, false}},
			[]string{"1/0", "2/0", "2/1", "1/1", "1/2"}, ReseqStats{InOrder: 4, Held: 1, ReleasedInOrder: 1}},
		{"a flow first seen far from 0: its first packet sets the order", ReseqOptions{}, []rsEv{{0, 3, 1000, false}, {1, 3, 999, false}, {2, 3, 1002, false}, {3, 3, 1001, false}},
			seqs(3, 1000, 999, 1001, 1002), ReseqStats{InOrder: 2, Late: 1, Held: 1, ReleasedInOrder: 1}},
		{"flow table full: pass through", ReseqOptions{Flows: 1}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false},
			{2, 2, 0, false}, {3, 2, 2, false}, {4, 2, 3, false}, {5, 1, 1, false}},
			[]string{"1/0", "2/0", "2/2", "2/3", "1/1", "1/2"}, ReseqStats{InOrder: 4, Held: 1, Overflow: 1, Skipped: 1, ReleasedInOrder: 1}},
		{"packets full: the flow gives up its gap", ReseqOptions{Packets: 2}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 1, 3, false}, {3, 1, 5, false}, {4, 1, 4, false}},
			seqs(1, 0, 2, 3, 5, 4), ReseqStats{InOrder: 1, Held: 2, Overflow: 1, Skipped: 2, ReleasedTimeout: 2, Late: 1}},
		{"packets full: held after the packet follow it", ReseqOptions{Packets: 1}, []rsEv{{0, 1, 0, false}, {1, 1, 3, false}, {2, 1, 2, false}, {3, 1, 4, false}},
			seqs(1, 0, 2, 3, 4), ReseqStats{InOrder: 2, Held: 1, Overflow: 1, Skipped: 1, ReleasedTimeout: 1}},
		{"beyond the window", ReseqOptions{Window: 4}, []rsEv{{0, 1, 0, false}, {1, 1, 2, false}, {2, 1, 10, false}, {3, 1, 11, false}},
			seqs(1, 0, 2, 10, 11), ReseqStats{InOrder: 2, Held: 1, Overflow: 1, Skipped: 8, ReleasedTimeout: 1}},
		{"sequence wrap", ReseqOptions{}, []rsEv{{0, 1, top - 1, false}, {1, 1, top, false}, {2, 1, 1, false}, {3, 1, 0, false}, {4, 1, 2, false}},
			seqs(1, top-1, top, 0, 1, 2), ReseqStats{InOrder: 4, Held: 1, ReleasedInOrder: 1}},
		{"sender restarted the flow", ReseqOptions{Window: 4}, []rsEv{{0, 1, 100000, false}, {1, 1, 100001, false}, {2, 1, 5, false}, {3, 1, 6, false}},
			seqs(1, 100000, 100001, 5, 6), ReseqStats{InOrder: 3, Resyncs: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResequencer(tt.opts)
			got := rsRun(t, r, 100*time.Millisecond, tt.evs)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("delivered %v, want %v", got, tt.want)
			}
			st := r.stats()
			if st.HeldNow != 0 || st.HeldBytesNow != 0 {
				t.Errorf("still holding %d packets, %d bytes", st.HeldNow, st.HeldBytesNow)
			}
			type ctr struct {
				name      string
				got, want uint64
			}
			for _, c := range []ctr{
				{"in_order", st.InOrder, tt.st.InOrder}, {"held", st.Held, tt.st.Held},
				{"released_in_order", st.ReleasedInOrder, tt.st.ReleasedInOrder},
				{"released_timeout", st.ReleasedTimeout, tt.st.ReleasedTimeout},
				{"skipped", st.Skipped, tt.st.Skipped}, {"late", st.Late, tt.st.Late},
				{"duplicates", st.Duplicates, tt.st.Duplicates}, {"overflow", st.Overflow, tt.st.Overflow},
				{"resyncs", st.Resyncs, tt.st.Resyncs}, {"dropped", st.Dropped, 0},
			} {
				if c.got != c.want {
					t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
				}
			}
			var holds uint64
			for _, n := range st.HoldMs {
				holds += n
			}
			if holds != st.ReleasedInOrder+st.ReleasedTimeout {
				t.Errorf("hold histogram counts %d, released %d", holds, st.ReleasedInOrder+st.ReleasedTimeout)
			}
		})
	}
}

// TestResequencerEpoch: a flow numbered afresh (the other epoch) starts
// again from 0, and what the old epoch held goes out first.
func TestResequencerEpoch(t *testing.T) {
	r := newResequencer(ReseqOptions{})
	t0 := time.Unix(1_800_000_000, 0)
	var out []string
	push := func(ms int, seq uint32, epoch bool) {
		pkt := rsPayload(1, seq)
		if r.push(t0.Add(time.Duration(ms)*time.Millisecond), FlowTag{Flow: 1, Seq: seq, Epoch: epoch}, pkt) == reseqDeliver {
			out = append(out, string(pkt))
		}
		for buf, n, ok := r.pop(); ok; buf, n, ok = r.pop() {
			out = append(out, string(buf[Headroom:Headroom+n]))
			putBuf(buf)
		}
	}
	for i, e := range []struct {
		seq   uint32
		epoch bool
	}{{0, true}, {1, true}, {3, true}, {1, false}, {0, false}, {2, false}} {
		push(i, e.seq, e.epoch)
	}
	if want := seqs(1, 0, 1, 3, 0, 1, 2); !slices.Equal(out, want) {
		t.Fatalf("delivered %v, want %v", out, want)
	}
}

// TestResequencerDeadline checks the timer contract: nothing is due while
// nothing is held, the deadline is the cap before any sample, and flush
// before it releases nothing.
func TestResequencerDeadline(t *testing.T) {
	r := newResequencer(ReseqOptions{})
	t0 := time.Unix(1_800_000_000, 0)
	if _, ok := r.nextDeadline(); ok {
		t.Fatal("a deadline with nothing held")
	}
	r.push(t0, FlowTag{Flow: 7, Seq: 0, WaitMs: 80}, []byte("a"))
	r.push(t0.Add(time.Millisecond), FlowTag{Flow: 7, Seq: 2, WaitMs: 80}, []byte("c"))
	d, ok := r.nextDeadline()
	if want := t0.Add(81 * time.Millisecond); !ok || !d.Equal(want) {
		t.Fatalf("deadline %v %v, want %v", d, ok, want)
	}
	r.flush(d.Add(-time.Nanosecond))
	if _, _, ok := r.pop(); ok {
		t.Fatal("released before the deadline")
	}
	r.flush(d)
	buf, n, ok := r.pop()
	if !ok || string(buf[Headroom:Headroom+n]) != "c" {
		t.Fatalf("flush at the deadline released %v", ok)
	}
	putBuf(buf)
	if _, ok := r.nextDeadline(); ok {
		t.Fatal("a deadline after everything was released")
	}
}

// TestResequencerAdapts checks that the bound follows the observed fill
// waits and the spread hint, capped by the flow's wait.
func TestResequencerAdapts(t *testing.T) {
	r := newResequencer(ReseqOptions{})
	var evs []rsEv
	for i := range 50 { // every third packet is 3 ms late
		b := uint32(3 * i)
		at := 10 * i
		evs = append(evs, rsEv{at, 1, b, false}, rsEv{at + 1, 1, b + 2, false}, rsEv{at + 4, 1, b + 1, false})
	}
	rsRun(t, r, 100*time.Millisecond, evs)
	w := time.Duration(r.wait(100))
	if w < 3*time.Millisecond || w > 20*time.Millisecond {
		t.Fatalf("bound after 3 ms fills = %v, want a few ms", w)
	}
	r.setSpread(40*time.Millisecond, 0)
	if w := time.Duration(r.wait(100)); w != 42*time.Millisecond {
		t.Fatalf("bound with a 40 ms spread = %v, want 42ms", w)
	}
	if w := time.Duration(r.wait(30)); w != 30*time.Millisecond {
		t.Fatalf("bound capped at 30 ms = %v", w)
	}
	// A packet later than the bound raises it.
	r.setSpread(0, 0)
	before := r.wait(100)
	rsRun(t, r, 100*time.Millisecond, []rsEv{{1000, 1, 150, false}, {1001, 1, 152, false}, {1100, 0, 0, true}, {1150, 1, 151, false}})
	if after := r.wait(100); after <= before {
		t.Fatalf("a late packet did not raise the bound: %v → %v", time.Duration(before), time.Duration(after))
	}
}

// TestResequencerFECFill fills a gap with the packet the FEC decoder
// reconstructs: its flow tag travels inside the protected payload.
func TestResequencerFECFill(t *testing.T) {
	const k = 4
	enc, err := fec.NewEncoder(fec.EncoderOptions{K: k, MaxPacketLen: 200})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := fec.NewDecoder(fec.DecoderOptions{MaxPacketLen: 200})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	var payloads [k][]byte
	var refs [k]fec.Ref
	for i := range k {
		payloads[i] = append(AppendFlowTag(nil, FlowTag{Flow: 9, Seq: uint32(i), WaitMs: 100}), rsPayload(9, uint32(i))...)
		refs[i], _, _ = enc.Add(t0, payloads[i], 0)
	}
	var par fec.Parity
	for range k {
		par.Bufs = append(par.Bufs, make([]byte, 200+fec.ShardOverhead))
	}
	if !enc.Seal(refs[0].Block, &fec.Redundancy{Ratio: 0.25}, &par) || len(par.Shards) != 1 {
		t.Fatalf("no parity: %d shards", len(par.Shards))
	}
	rec := newRecovered(1280)
	r := newResequencer(ReseqOptions{})
	var out []string
	deliver := func(now time.Time, payload []byte) {
		tag, n, err := ParseFlowTag(payload)
		if err != nil {
			t.Fatalf("payload %q: %v", payload, err)
		}
		if r.push(now, tag, payload[n:]) == reseqDeliver {
			out = append(out, string(payload[n:]))
		}
		for buf, n, ok := r.pop(); ok; buf, n, ok = r.pop() {
			out = append(out, string(buf[Headroom:Headroom+n]))
			putBuf(buf)
		}
	}
	for i, now := range []time.Duration{0, 0, 1, 2} { // packet 1 is lost
		if i == 1 {
			continue
		}
		if v := dec.AddData(t0.Add(now*time.Millisecond), refs[i], payloads[i], rec); !v.Deliver() {
			t.Fatalf("data %d: %v", i, v)
		}
		deliver(t0.Add(now*time.Millisecond), payloads[i])
	}
	at := t0.Add(20 * time.Millisecond)
	dec.AddParity(at, par.ShardRef(0), par.Shards[0], rec)
	if len(rec.Sizes) != 1 || !IsFlowTagged(rec.Packet(0)) {
		t.Fatalf("reconstructed %d packets", len(rec.Sizes))
	}
	deliver(at, rec.Packet(0))
	if want := seqs(9, 0, 1, 2, 3); !slices.Equal(out, want) {
		t.Fatalf("delivered %v, want %v", out, want)
	}
	if st := r.stats(); st.ReleasedInOrder != 2 || st.HoldMs[holdBucket(int64(19*time.Millisecond))] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResequencerClose(t *testing.T) {
	r := newResequencer(ReseqOptions{})
	rsRun(t, r, time.Second, []rsEv{{0, 1, 0, false}, {1, 1, 5, false}, {2, 2, 0, false}, {3, 2, 9, false}})
	if st := r.stats(); st.HeldNow != 2 {
		t.Fatalf("held %d, want 2", st.HeldNow)
	}
	r.close()
	if st := r.stats(); st.HeldNow != 0 || st.Held != 0 {
		t.Fatalf("after close: %+v", st)
	}
}

func TestResequencerAllocs(t *testing.T) {
	r := newResequencer(ReseqOptions{})
	pkt := make([]byte, 1200)
	now := time.Unix(1_800_000_000, 0)
	var seq uint32
	rsWarm(r, pkt, &now, &seq) // tables and pooled buffers
	if a := testing.AllocsPerRun(200, func() { rsWarm(r, pkt, &now, &seq) }); a != 0 {
		t.Fatalf("%v allocations per 4 packets", a)
	}
}

// rsWarm pushes 4 packets of one flow, the second and third ahead of the
// first's gap, and pops what they release.
func rsWarm(r *resequencer, pkt []byte, now *time.Time, seq *uint32) {
	for _, d := range [4]uint32{0, 2, 3, 1} {
		*now = now.Add(100 * time.Microsecond)
		r.push(*now, FlowTag{Flow: 1, Seq: (*seq + d) & flowSeqMask}, pkt)
		for buf, _, ok := r.pop(); ok; buf, _, ok = r.pop() {
			putBuf(buf)
		}
	}
	*seq += 4
}

// BenchmarkReseq measures one packet through the resequencer: a flow in
// order, and a flow where every fourth packet is 2 places late (half the
// packets held and copied).
func BenchmarkReseq(b *testing.B) {
	pkt := make([]byte, 1200)
	for _, bc := range []struct {
		name  string
		order [4]uint32
	}{{"in_order", [4]uint32{0, 1, 2, 3}}, {"reorder_1_in_4", [4]uint32{0, 2, 3, 1}}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newResequencer(ReseqOptions{})
			now := time.Unix(1_800_000_000, 0)
			var seq uint32
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			i := 0
			for b.Loop() {
				now = now.Add(10 * time.Microsecond)
				r.push(now, FlowTag{Flow: 1, Seq: (seq + bc.order[i]) & flowSeqMask}, pkt)
				for buf, _, ok := r.pop(); ok; buf, _, ok = r.pop() {
					putBuf(buf)
				}
				if i++; i == 4 {
					i, seq = 0, seq+4
				}
			}
			if st := r.stats(); st.Skipped != 0 {
				b.Fatalf("skipped %d", st.Skipped)
			}
		})
	}
}

// TestResequencerRandom sends flows over paths of different delay, with
// jitter and loss, and checks what the TUN gets: every packet that arrived
// exactly once, each flow in order except the packets counted late, and
// nothing held at the end; with a bound above the delay spread and room
// enough, no packet is late and only lost packets are skipped.
func TestResequencerRandom(t *testing.T) {
	tests := []struct {
		name     string
		opts     ReseqOptions
		waitMs   int
		loss     float64
		wantLate bool // late packets are allowed
	}{
		{"room, bound above the spread", ReseqOptions{}, 200, 0.02, false},
		{"room, no loss", ReseqOptions{}, 200, 0, false},
		{"bound below the spread", ReseqOptions{}, 10, 0.02, true},
		{"tight tables", ReseqOptions{Flows: 2, Window: 8, Packets: 12, Bytes: 100}, 200, 0.02, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			type arrival struct {
				at   time.Duration
				flow uint16
				seq  uint32
			}
			var arr []arrival
			const flows, perFlow = 5, 2000
			lost := 0
			for f := range flows {
				for s := range perFlow {
					if rng.Float64() < tt.loss {
						lost++
						continue
					}
					sent := time.Duration(s) * time.Millisecond / 2
					delay := time.Duration(10+30*rng.IntN(3))*time.Millisecond + time.Duration(rng.IntN(3000))*time.Microsecond
					arr = append(arr, arrival{sent + delay, uint16(f * 100), uint32(s)})
				}
			}
			slices.SortStableFunc(arr, func(a, b arrival) int { return int(a.at - b.at) })
			r := newResequencer(tt.opts)
			t0 := time.Unix(1_800_000_000, 0)
			var evs []rsEv
			for _, a := range arr {
				ms := int(a.at / time.Millisecond)
				evs = append(evs, rsEv{ms, 0, 0, true}, rsEv{ms, a.flow, a.seq, false})
			}
			evs = append(evs, rsEv{int(arr[len(arr)-1].at/time.Millisecond) + 10_000, 0, 0, true})
			_ = t0
			out := rsRun(t, r, time.Duration(tt.waitMs)*time.Millisecond, evs)
			st := r.stats()
			if len(out) != len(arr) || st.Dropped != 0 || st.HeldNow != 0 {
				t.Fatalf("delivered %d of %d, dropped %d, still held %d", len(out), len(arr), st.Dropped, st.HeldNow)
			}
			seen := map[string]bool{}
			top := map[uint16]int{}
			inversions := 0
			for _, p := range out {
				if seen[p] {
					t.Fatalf("%s delivered twice", p)
				}
				seen[p] = true
				var f uint16
				var s int
				fmt.Sscanf(p, "%d/%d", &f, &s)
				if m, ok := top[f]; ok && s < m {
					inversions++
				} else {
					top[f] = s
				}
			}
			if uint64(inversions) != st.Late {
				t.Fatalf("%d packets out of order, %d counted late", inversions, st.Late)
			}
			if !tt.wantLate && (st.Late != 0 || st.Skipped > uint64(lost)) {
				t.Fatalf("late %d, skipped %d of %d lost: %+v", st.Late, st.Skipped, lost, st)
			}
			t.Logf("%d packets, %d lost: %+v", len(arr), lost, st)
		})
	}
}
