package policy

import (
	"errors"
	"testing"
)

func TestRateReportRoundTrip(t *testing.T) {
	for _, r := range []RateReport{
		{},
		{Start: 1, End: 50_001, Bytes: 62_500, Datagrams: 50, Lost: 2, HighestSeq: 1<<32 - 1, OWDMin: -5_000_000, OWDMean: -4_990_000},
		{Start: 1 << 60, End: 1<<60 + 7, Bytes: 1<<32 - 1, Datagrams: 1, OWDMin: 1 << 40, OWDMean: 1 << 40},
	} {
		b := r.AppendBinary(nil)
		if len(b) != RateReportLen {
			t.Fatalf("%+v: %d bytes, want %d", r, len(b), RateReportLen)
		}
		var got RateReport
		if err := got.Parse(b); err != nil || got != r {
			t.Errorf("round trip of %+v: %+v, %v", r, got, err)
		}
	}
}

func TestRateReportParseErrors(t *testing.T) {
	good := (&RateReport{Start: 10, End: 20, OWDMin: 3, OWDMean: 4}).AppendBinary(nil)
	backwards := (&RateReport{Start: 20, End: 10}).AppendBinary(nil)
	meanBelow := (&RateReport{Start: 1, End: 2, OWDMin: 5, OWDMean: 4}).AppendBinary(nil)
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil}, {"short", good[:RateReportLen-1]}, {"backwards", backwards}, {"mean below min", meanBelow},
	} {
		r := RateReport{Bytes: 99}
		if err := r.Parse(c.b); !errors.Is(err, ErrRateReport) || r.Bytes != 99 {
			t.Errorf("%s: err %v, report %+v; want ErrRateReport and no change", c.name, err, r)
		}
	}
}

func FuzzRateReport(f *testing.F) {
	f.Add((&RateReport{Start: 1, End: 50_001, Bytes: 1200, Datagrams: 1, OWDMin: 7, OWDMean: 9}).AppendBinary(nil))
	f.Add(make([]byte, RateReportLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r RateReport
		if r.Parse(b) != nil {
			return
		}
		var again RateReport
		if err := again.Parse(r.AppendBinary(nil)); err != nil || again != r {
			t.Fatalf("re-encoding %+v: %+v, %v", r, again, err)
		}
		e := NewRateEstimator(RateConfig{})
		e.Update(modelStart, &r, SendStats{SentBytes: int64(r.Bytes), BacklogBytes: 1})
		if tg := e.Target(); !(tg >= DefaultMinRate && tg <= DefaultMaxRate) {
			t.Fatalf("target %v out of bounds after %+v", tg, r)
		}
	})
}

func TestRateMeter(t *testing.T) {
	type dg struct {
		now, send uint64
		seq       uint32
	}
	cases := []struct {
		name      string
		dgs       []dg
		lost      uint32
		highest   uint32
		min, mean int64
	}{
		{"in order", []dg{{100, 50, 1}, {200, 120, 2}, {300, 240, 3}}, 0, 3, 50, 63},
		{"gap", []dg{{100, 0, 1}, {200, 0, 4}}, 2, 4, 100, 150},
		{"gap filled late", []dg{{100, 0, 1}, {200, 0, 4}, {300, 0, 2}}, 1, 4, 100, 200},
		{"wrap", []dg{{100, 0, 1<<32 - 2}, {200, 0, 1}}, 2, 1, 100, 150},
		{"restart resyncs", []dg{{100, 0, 1 << 30}, {200, 0, 5}}, 0, 5, 100, 150},
		{"clock offset", []dg{{1_000_000_100, 10, 1}, {1_000_000_300, 30, 2}}, 0, 2, 1_000_000_090, 1_000_000_180},
	}
	for _, c := range cases {
		var m RateMeter
		for _, d := range c.dgs {
			m.OnDatagram(d.now, d.send, d.seq, 1000)
		}
		end := c.dgs[len(c.dgs)-1].now + 100
		r := m.Report(end)
		if r.Lost != c.lost || r.HighestSeq != c.highest || r.OWDMin != c.min || r.OWDMean != c.mean ||
			r.Datagrams != uint32(len(c.dgs)) || r.Bytes != uint32(1000*len(c.dgs)) || r.Start != c.dgs[0].now {
			t.Errorf("%s: %+v; want lost %d highest %d owd %d/%d", c.name, r, c.lost, c.highest, c.min, c.mean)
		}
		next := m.Report(end + 500)
		if next.Start != end || next.End != end+500 || next.Datagrams != 0 || next.Lost != 0 {
			t.Errorf("%s: next interval %+v, want an empty one of 500 µs", c.name, next)
		}
	}
}

func TestRateMeterAllocs(t *testing.T) {
	var m RateMeter
	seq := uint32(0)
	if n := testing.AllocsPerRun(1000, func() {
		seq++
		m.OnDatagram(uint64(seq)*100, uint64(seq)*100-40, seq, 1200)
		if seq%50 == 0 {
			_ = m.Report(uint64(seq) * 100)
		}
	}); n != 0 {
		t.Errorf("%v allocations per datagram, want 0", n)
	}
}
