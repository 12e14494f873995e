package tunnel

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/fec"
	"github.com/bondd/bondd/internal/timerheap"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tun"
)

// stageSend tags the TCP packets with ids 0..n-1 as the send path would
// (tagPacket, FlagFlow) under dir and returns their datagrams; dir nil is
// a rule's resequence_ms of DefaultResequenceWait (TCP is not held by
// default).
func stageSend(t *testing.T, n int, dir *rules.Directive, sport uint16) [][]byte {
	t.Helper()
	if dir == nil {
		dir = &rules.Directive{Fields: rules.FieldResequence, Resequence: DefaultResequenceWait}
	}
	cls, err := classify.New(classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ft := newFlowTable(0, 0)
	var md classify.Metadata
	now := time.Unix(1_800_000_000, 0)
	var dgs [][]byte
	for i := range n {
		buf := getBuf()
		pkt := tcp4(sport, 443)
		binary.BigEndian.PutUint16(pkt[4:], uint16(i)) // IP id: which packet
		l := copy(buf[Headroom:], pkt)
		cls.Parse(buf[Headroom:Headroom+l], &md)
		tl := ft.tagPacket(buf, &md, dir, now)
		if tl == 0 {
			t.Fatal("a TCP packet was not tagged")
		}
		h := Header{Type: TypeData, Flags: FlagFlow, Seq: uint64(i), Timestamp: 1}
		off := Headroom - tl - HeaderLen(&h)
		AppendHeader(buf[off:off], &h)
		dgs = append(dgs, slices.Clone(buf[off:Headroom+l]))
		putBuf(buf)
	}
	return dgs
}

// stageRecv parses dg as the receive path would and hands it to x.
func stageRecv(t *testing.T, x *reseqRx, now time.Time, dg []byte, write deliverFunc) {
	var h Header
	n, err := ParseHeader(dg, &h)
	if err != nil || h.Flags&FlagFlow == 0 {
		t.Errorf("header: %v %+v", err, h)
		return
	}
	if !x.deliver(now, dg, n, write) {
		t.Errorf("deliver refused %x", dg)
	}
}

// ids records the IP ids of what is written, checking the headroom.
type ids struct {
	mu  sync.Mutex
	got []uint16
}

func (w *ids) write(pkt []byte, off int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if off < tun.MinWriteOffset || len(pkt)-off != 40 || pkt[off] != 0x45 {
		panic("bad write")
	}
	w.got = append(w.got, binary.BigEndian.Uint16(pkt[off+4:]))
}

func (w *ids) snapshot() []uint16 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

func TestReseqStageReorder(t *testing.T) {
	dgs := stageSend(t, 5, nil, 40000)
	x := newReseqRx(ReseqOptions{})
	var w ids
	now := time.Unix(1_800_000_000, 0)
	for _, i := range []int{0, 3, 1, 4, 2} {
		stageRecv(t, x, now, dgs[i], w.write)
	}
	if got := w.snapshot(); !slices.Equal(got, []uint16{0, 1, 2, 3, 4}) {
		t.Fatalf("wrote %v", got)
	}
	if !x.deliver(now, []byte{0x45, 0, 0}, 0, w.write) {
		if _, bad := x.stats(); bad != 1 {
			t.Fatalf("bad tags %d", bad)
		}
	} else {
		t.Fatal("an untagged payload was taken")
	}
}

func TestReseqStageUntagged(t *testing.T) {
	cls, _ := classify.New(classify.Options{})
	var md classify.Metadata
	off := &rules.Directive{Fields: rules.FieldResequence}
	for name, c := range map[string]struct {
		pkt []byte
		dir *rules.Directive
	}{
		"tcp, resequence_ms 0": {tcp4(1, 2), off},
		"tcp, no rule":         {tcp4(1, 2), nil},
		"icmp":                 {append([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1}, make([]byte, 18)...), nil},
	} {
		buf := getBuf()
		l := copy(buf[Headroom:], c.pkt)
		cls.Parse(buf[Headroom:Headroom+l], &md)
		if tl := newFlowTable(0, 0).tagPacket(buf, &md, c.dir, time.Now()); tl != 0 {
			t.Errorf("%s: tagged (%d bytes)", name, tl)
		}
		putBuf(buf)
	}
}

// TestReseqStageConcurrent delivers one flow from several goroutines, as
// the paths' receive routines do: the flow still comes out in order. (n
// stays below the window, so no worker can fall a window behind.)
func TestReseqStageConcurrent(t *testing.T) {
	const n, workers = DefaultReseqWindow - 1, 4
	dgs := stageSend(t, n, &rules.Directive{Fields: rules.FieldResequence, Resequence: rules.MaxResequence}, 40000)
	x := newReseqRx(ReseqOptions{})
	var w ids
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := g; i < n; i += workers {
				stageRecv(t, x, time.Now(), dgs[i], w.write)
			}
		})
	}
	wg.Wait()
	got := w.snapshot()
	if len(got) != n {
		t.Fatalf("wrote %d of %d", len(got), n)
	}
	for i, id := range got {
		if id != uint16(i) {
			t.Fatalf("write %d is packet %d", i, id)
		}
	}
}

// flushStage returns a resequencing stage whose flush timer runs in a heap
// of its own, writing to w; the heap closes with the test.
func flushStage(t *testing.T) (*reseqRx, *ids) {
	x, w, h := newReseqRx(ReseqOptions{}), new(ids), timerheap.New()
	h.Start()
	t.Cleanup(h.Close)
	x.startFlush(h, w.write)
	return x, w
}

// TestReseqStageFlush: the flush timer releases a held packet once its
// flow's wait bound (resequence_ms 20) passes (on the heap's next wake-up,
// at most timerheap.Coalesce later), and stop returns the held buffers.
func TestReseqStageFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dgs := stageSend(t, 4, &rules.Directive{Fields: rules.FieldResequence, Resequence: 20 * time.Millisecond}, 40000)
		x, w := flushStage(t)
		start := time.Now()
		stageRecv(t, x, time.Now(), dgs[0], w.write)
		stageRecv(t, x, time.Now(), dgs[2], w.write) // 1 is lost
		synctest.Wait()
		if got := w.snapshot(); !slices.Equal(got, []uint16{0}) {
			t.Fatalf("before the bound: wrote %v", got)
		}
		time.Sleep(20 * time.Millisecond) // fake time: the bound
		synctest.Wait()
		time.Sleep(timerheap.Coalesce)
		synctest.Wait()
		if got := w.snapshot(); !slices.Equal(got, []uint16{0, 2}) || time.Since(start) != 20*time.Millisecond+timerheap.Coalesce {
			t.Fatalf("after %v: wrote %v", time.Since(start), got)
		}
		stageRecv(t, x, time.Now(), dgs[3], w.write)
		if got := w.snapshot(); !slices.Equal(got, []uint16{0, 2, 3}) {
			t.Fatalf("wrote %v", got)
		}
		stageRecv(t, x, time.Now(), dgs[1], w.write) // too late: delivered, counted
		st, _ := x.stats()
		if st.Late != 1 || st.Skipped != 1 || st.ReleasedTimeout != 1 || st.HeldNow != 0 {
			t.Fatalf("stats %+v", st)
		}
		// Another flow holds a packet when the routine stops: it is not
		// written, and its buffer goes back to the pool.
		other := stageSend(t, 2, nil, 40001)
		stageRecv(t, x, time.Now(), other[1], w.write)
		if st, _ := x.stats(); st.HeldNow != 1 {
			t.Fatalf("held %d, want 1", st.HeldNow)
		}
		x.stop()
		if st, _ := x.stats(); st.HeldNow != 0 || len(w.snapshot()) != 4 {
			t.Fatalf("after the routine stopped: held %d, wrote %v", st.HeldNow, w.snapshot())
		}
	})
}

// TestReseqStageFlushBatches: a release longer than reseqFlushBatch is
// written over several passes of the heap, all of it, in order.
func TestReseqStageFlushBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3*reseqFlushBatch + 5
		dgs := stageSend(t, n+1, &rules.Directive{Fields: rules.FieldResequence, Resequence: 20 * time.Millisecond}, 40000)
		x, w := flushStage(t)
		for _, dg := range dgs[1:] { // 0 is lost: the rest waits
			stageRecv(t, x, time.Now(), dg, w.write)
		}
		synctest.Wait()
		if got := len(w.snapshot()); got != 0 {
			t.Fatalf("before the bound: wrote %d", got)
		}
		time.Sleep(20*time.Millisecond + timerheap.Coalesce)
		synctest.Wait()
		got := w.snapshot()
		if len(got) != n {
			t.Fatalf("wrote %d of %d", len(got), n)
		}
		for i, id := range got {
			if id != uint16(i+1) {
				t.Fatalf("write %d is packet %d", i, id)
			}
		}
		x.stop()
	})
}

func TestReseqStageAllocs(t *testing.T) {
	dgs := stageSend(t, 4, nil, 40000)
	x := newReseqRx(ReseqOptions{})
	var w ids
	w.got = make([]uint16, 0, 4096)
	write := w.write
	now := time.Unix(1_800_000_000, 0)
	var h Header
	run := func() {
		for _, i := range []int{0, 2, 3, 1} {
			n, _ := ParseHeader(dgs[i], &h)
			x.deliver(now, dgs[i], n, write)
		}
		x.mu.Lock()
		x.rs.flows[0].seen = false // the same four packets again, as a new flow
		x.mu.Unlock()
		w.got = w.got[:0]
	}
	run()
	if a := testing.AllocsPerRun(200, run); a != 0 {
		t.Fatalf("%v allocations per 4 packets", a)
	}
}

// BenchmarkReseqStage measures the receive stage per packet: flow tag
// parse, lock, resequencer and a no-op TUN write, for a flow where every
// fourth packet is 2 places late.
func BenchmarkReseqStage(b *testing.B) {
	x := newReseqRx(ReseqOptions{})
	pkt := make([]byte, Headroom+1200)
	write := func([]byte, int) {}
	now := time.Unix(1_800_000_000, 0)
	var seq uint32
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(10 * time.Microsecond)
		off := Headroom - MaxFlowTagLen
		AppendFlowTag(pkt[off:off], FlowTag{Flow: 1, Seq: (seq + [4]uint32{0, 2, 3, 1}[i]) & flowSeqMask, WaitMs: 100})
		x.deliver(now, pkt, off, write)
		if i++; i == 4 {
			i, seq = 0, seq+4
		}
	}
}

// TestReseqSpread: the spread is from the lowest minimum RTT to the
// highest smoothed RTT of the connected paths, plus the FEC budget (30
// ms); the retransmission hint 9/8 of the highest smoothed RTT.
func TestReseqSpread(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	type pm struct {
		srtt, min time.Duration
		up        bool
	}
	for _, tt := range []struct {
		name           string
		paths          []pm
		spread, resend time.Duration
	}{
		{"no path", nil, 0, 0},
		{"no RTT sample", []pm{{0, 0, true}}, 0, 0},
		{"one path, no queue", []pm{{ms(40), ms(40), true}}, fec.DefaultBudget, ms(45)},
		{"one path, 30 ms of queue", []pm{{ms(70), ms(40), true}}, ms(30) + fec.DefaultBudget, us(78750)},
		{"two paths", []pm{{ms(30), ms(30), true}, {ms(90), ms(90), true}}, ms(60) + fec.DefaultBudget, us(101250)},
		{"two paths, the slow one queued", []pm{{ms(30), ms(30), true}, {ms(120), ms(90), true}}, ms(90) + fec.DefaultBudget, ms(135)},
		{"a down path does not count", []pm{{ms(30), ms(30), true}, {ms(300), ms(300), false}}, fec.DefaultBudget, us(33750)},
		{"no min RTT yet", []pm{{ms(50), 0, true}}, fec.DefaultBudget, us(56250)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Now()
			set := &pathSet{}
			for i, p := range tt.paths {
				s := policy.NewPath(fmt.Sprint("p", i), nil, 16)
				s.OnMetrics(p.srtt, p.min, 12000, 0)
				s.SetConnected(p.up, now)
				s.OnReceive(now)
				set.states = append(set.states, s)
			}
			if spread, resend := reseqSpread(set, now); spread != tt.spread || resend != tt.resend {
				t.Fatalf("reseqSpread = %v, %v, want %v, %v", spread, resend, tt.spread, tt.resend)
			}
		})
	}
}

// TestReseqWaitHints: the bound is the larger of the spread and the
// retransmission hint, plus MinWait, within the flow's cap; a flow whose
// cap is below the retransmission hint waits the spread alone.
func TestReseqWaitHints(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tt := range []struct {
		name                 string
		spread, resend, capw time.Duration
		want                 time.Duration
	}{
		{"spread larger", ms(60), ms(40), ms(150), ms(60) + DefaultReseqMinWait},
		{"resend larger", ms(30), ms(90), ms(150), ms(90) + DefaultReseqMinWait},
		{"resend above the cap: spread alone", ms(30), ms(200), ms(150), ms(30) + DefaultReseqMinWait},
		{"both above the cap: the cap", ms(300), ms(400), ms(150), ms(150)},
		{"no hints, not warm: the cap", 0, 0, ms(150), ms(150)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newResequencer(ReseqOptions{})
			r.setSpread(tt.spread, tt.resend)
			if got := time.Duration(r.wait(uint16(tt.capw / time.Millisecond))); got != tt.want {
				t.Fatalf("wait = %v, want %v", got, tt.want)
			}
		})
	}
}
