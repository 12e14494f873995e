package emu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// synthTrace returns a Mahimahi trace of n opportunities with a varying
// pattern: bursts, repeats and gaps.
func synthTrace(n int) *MahimahiTrace {
	tr := &MahimahiTrace{Name: "synth"}
	ms := uint32(1)
	for i := 0; i < n; i++ {
		tr.Opportunities = append(tr.Opportunities, ms)
		switch {
		case i%17 == 0:
			ms += 40 // a gap
		case i%3 == 0:
			// repeat: several opportunities in one ms
		default:
			ms += uint32(1 + i%4)
		}
	}
	return tr
}

func mustParseMahimahi(t testing.TB, s string) *MahimahiTrace {
	t.Helper()
	tr, err := ParseMahimahi(strings.NewReader(s), "t")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParseMahimahi(t *testing.T) {
	tests := []struct {
		name, in string
		want     []uint32
		err      string // substring of the error, "" for success
	}{
		{"one", "1\n", []uint32{1}, ""},
		{"no final newline", "1\n1\n3", []uint32{1, 1, 3}, ""},
		{"crlf and blanks", " 0 \r\n5\r\n", []uint32{0, 5}, ""},
		{"empty file", "", nil, "t: no timestamps"},
		{"empty line", "1\n\n2\n", nil, "t:2: empty line"},
		{"decreasing", "1\n5\n4\n", nil, "t:3: timestamp 4 ms is before"},
		{"not a number", "1\nx\n", nil, "t:2: want a timestamp"},
		{"negative", "-1\n", nil, "t:1: want a timestamp"},
		{"float", "1.5\n", nil, "t:1: want a timestamp"},
		{"too big", "4294967296\n", nil, "t:1: want a timestamp"},
		{"zero length", "0\n0\n", nil, "t:2: trace must last a nonzero time"},
		{"long line", "1\n" + strings.Repeat("1", 5000) + "\n", nil, "t:2: line too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ParseMahimahi(strings.NewReader(tc.in), "t")
			if tc.err != "" {
				var pe *ParseError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &pe) {
					t.Fatalf("err %v, want *ParseError containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(tr.Opportunities) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", tr.Opportunities, tc.want)
			}
		})
	}
}

// TestMahimahiSemantics checks departure times against mm-link's
// LinkQueue::rationalize worked by hand.
func TestMahimahiSemantics(t *testing.T) {
	type pkt struct {
		at   time.Duration
		size int
		dep  time.Duration // expected departure (no delay configured)
	}
	ms := time.Millisecond
	tests := []struct {
		name  string
		trace string
		pkts  []pkt
	}{
		{"one per opportunity, looping", "1\n1\n3\n", []pkt{
			{0, 1500, 1 * ms}, {0, 1500, 1 * ms}, {0, 1500, 3 * ms},
			{0, 1500, 4 * ms}, {0, 1500, 4 * ms}, {0, 1500, 6 * ms},
		}},
		{"arrival in the opportunity's ms misses it", "2\n4\n", []pkt{
			{2 * ms, 1500, 4 * ms}, {2*ms + 500*time.Microsecond, 1500, 6 * ms},
		}},
		{"arrival just before the opportunity uses it", "2\n4\n", []pkt{
			{2*ms - 1, 1500, 2 * ms},
		}},
		{"small packets share an opportunity", "1\n2\n", []pkt{
			{0, 500, 1 * ms}, {0, 500, 1 * ms}, {0, 500, 1 * ms}, {0, 500, 2 * ms},
		}},
		{"a packet spans two opportunities", "1\n2\n3\n", []pkt{
			// 1000 B, then 500+500 B, then 1000 B of the second
			// opportunity (it fills up), then the third.
			{0, 1000, 1 * ms}, {0, 1000, 2 * ms}, {0, 1000, 2 * ms}, {0, 1000, 3 * ms},
		}},
		{"leftover wasted when the queue empties", "1\n2\n3\n", []pkt{
			{0, 500, 1 * ms}, {1500 * time.Microsecond, 500, 2 * ms},
		}},
		{"leftover used when queued in time", "1\n5\n", []pkt{
			{0, 500, 1 * ms}, {900 * time.Microsecond, 500, 1 * ms},
		}},
		{"jumbo spans several", "1\n2\n3\n4\n", []pkt{
			{0, 4000, 3 * ms}, {0, 2000, 4 * ms},
		}},
		{"idle then far arrival", "10\n20\n", []pkt{
			{0, 1500, 10 * ms}, {95 * ms, 1500, 100 * ms}, {95 * ms, 1500, 110 * ms},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLink(LinkConfig{Mahimahi: mustParseMahimahi(t, tc.trace), QueueBytes: 1 << 30}, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range tc.pkts {
				rel, d := l.Send(p.at, p.size)
				if d != Delivered || rel != p.dep {
					t.Errorf("packet %d (%d B at %v): %v at %v, want delivered at %v", i, p.size, p.at, d, rel, p.dep)
				}
			}
		})
	}
}

func TestMahimahiTraceOffset(t *testing.T) {
	tr := mustParseMahimahi(t, "10\n20\n30\n")
	l, _ := NewLink(LinkConfig{Mahimahi: tr, TraceOffset: 15 * time.Millisecond}, 1)
	// Trace time 15 ms at model time 0: next opportunity at 20 ms → 5 ms.
	if rel, _ := l.Send(0, 1500); rel != 5*time.Millisecond {
		t.Errorf("release %v, want 5ms", rel)
	}
	// Offsets beyond the period wrap.
	l, _ = NewLink(LinkConfig{Mahimahi: tr, TraceOffset: 3*30*time.Millisecond + 15*time.Millisecond}, 1)
	if rel, _ := l.Send(0, 1500); rel != 5*time.Millisecond {
		t.Errorf("wrapped offset: release %v, want 5ms", rel)
	}
}

// saturate offers 1500-byte packets every gap for dur and returns the
// delivered bit rate measured up to dur.
func saturate(t testing.TB, cfg LinkConfig, dur, gap time.Duration) float64 {
	t.Helper()
	l, err := NewLink(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	var bits float64
	for at := time.Duration(0); at < dur; at += gap {
		if rel, d := l.Send(at, 1500); d == Delivered && rel <= dur {
			bits += 1500 * 8
		}
	}
	return bits / dur.Seconds()
}

func TestMahimahiDeliveredRate(t *testing.T) {
	tr := synthTrace(5000)
	period := tr.Period()
	want := float64(len(tr.Opportunities)) * 1500 * 8 / period.Seconds()
	// Offered: one 1500-byte packet per 100 µs (120 Mbit/s), far above the
	// trace's capacity; over 5 loops the delivered rate must match
	// lines×1500×8/period within 0.5 % (only the first and the last
	// opportunities of the window can be missed).
	got := saturate(t, LinkConfig{Mahimahi: tr, QueueDelay: 200 * time.Millisecond}, 5*period, 100*time.Microsecond)
	if math.Abs(got-want) > 0.005*want {
		t.Errorf("delivered %.4g bit/s, want %.4g ± 0.5%%", got, want)
	}
	if math.Abs(float64(tr.MeanRate())-want) > 1 {
		t.Errorf("MeanRate %v, want %.0f", tr.MeanRate(), want)
	}
}

// TestMahimahiRealTraces replays the real traces, saturated for one loop,
// and compares with lines×1500×8/duration.
func TestMahimahiRealTraces(t *testing.T) {
	dir := tracesDirOrSkip(t)
	for _, f := range []string{"ATT-LTE-driving.down", "TMobile-LTE-driving.down", "Verizon-LTE-short.down", "ATT-LTE-driving.up"} {
		t.Run(f, func(t *testing.T) {
			tr, err := LoadMahimahi(filepath.Join(dir, "cellular", "mahimahi", f))
			if err != nil {
				t.Fatal(err)
			}
			want := float64(len(tr.Opportunities)) * 1500 * 8 / tr.Period().Seconds()
			// Offered 1500 B per 200 µs = 60 Mbit/s, above every one of
			// these traces' peak seconds except a few T-Mobile ones (whose
			// backlog the 2-s queue carries into the next seconds).
			got := saturate(t, LinkConfig{Mahimahi: tr, QueueDelay: 2 * time.Second}, tr.Period(), 200*time.Microsecond)
			if math.Abs(got-want) > 0.01*want {
				t.Errorf("delivered %.4g Mbit/s, want %.4g ± 1%%", got/1e6, want/1e6)
			}
		})
	}
}

func TestParseStarlinkCSV(t *testing.T) {
	good := "26.5,48.1,83.8,88.3,0.0,0.01,0\n10,20,80,90,0.5,0,100\n"
	tests := []struct {
		name, in string
		dir      Direction
		err      string
		check    func(*Series) error
	}{
		{"up", good, Up, "", func(s *Series) error {
			if s.Interval != 100*time.Millisecond || s.Len() != 2 || s.Rate[0] != 26_500_000 || s.OWD[1] != 80*time.Millisecond || s.Loss[1] != 0.5 {
				return fmt.Errorf("%+v", s)
			}
			return nil
		}},
		{"down", good, Down, "", func(s *Series) error {
			if s.Rate[1] != 20_000_000 || s.OWD[0] != 88_300*time.Microsecond || s.Loss[0] != 0.01 {
				return fmt.Errorf("%+v", s)
			}
			return nil
		}},
		{"one row", "1,2,3,4,0,0,0\n", Up, "", func(s *Series) error {
			if s.Interval != StarlinkInterval {
				return fmt.Errorf("interval %v", s.Interval)
			}
			return nil
		}},
		{"1-s rows", "1,2,3,4,0,0,0\n1,2,3,4,0,0,1000\n", Up, "", func(s *Series) error {
			if s.Interval != time.Second {
				return fmt.Errorf("interval %v", s.Interval)
			}
			return nil
		}},
		{"empty", "", Up, "t: no rows", nil},
		{"short row", "1,2,3\n", Up, "t:1:", nil},
		{"text", "1,2,x,4,0,0,0\n", Up, "t:1: column 3", nil},
		{"negative", "1,2,-3,4,0,0,0\n", Up, "t:1: column 3", nil},
		{"NaN", "NaN,2,3,4,0,0,0\n", Up, "t:1: column 1", nil},
		{"loss > 1", "1,2,3,4,1.5,0,0\n", Up, "t:1: column 5: loss", nil},
		{"gap", good + "1,2,3,4,0,0,300\n", Up, "t:3: wall_time_ms", nil},
		{"not increasing", "1,2,3,4,0,0,100\n1,2,3,4,0,0,100\n", Up, "t:2: wall_time_ms", nil},
		{"zero capacity", "0,2,3,4,0,0,0\n0,2,3,4,0,0,100\n", Up, "capacity is zero", nil},
		{"quote", "\"1,2,3,4,0,0,0\n", Up, "t:1:", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseStarlinkCSV(strings.NewReader(tc.in), "t", tc.dir)
			checkParse(t, err, tc.err)
			if err == nil && tc.check != nil {
				if e := tc.check(s); e != nil {
					t.Error(e)
				}
			}
		})
	}
}

func checkParse(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	var pe *ParseError
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &pe) {
		t.Fatalf("err %v, want *ParseError containing %q", err, want)
	}
}

func TestParse5GophersCSV(t *testing.T) {
	hdr := "protocol,num_tcp_conn,seq_num,Sprint_throughput_mbps,TMobile_throughput_mbps,Verizon_throughput_mbps\n"
	good := hdr + "TCP,8,0,25.7,145.75,53.4\nTCP,8,1,65.0,0,82.3\n"
	tests := []struct {
		name, in, carrier string
		err               string
		want              []BitRate
	}{
		{"tmobile", good, "TMobile", "", []BitRate{145_750_000, 0}},
		{"T-Mobile spelling", good, "T-Mobile", "", []BitRate{145_750_000, 0}},
		{"verizon lower", good, "verizon", "", []BitRate{53_400_000, 82_300_000}},
		{"unknown carrier", good, "ATT", "t:1: header has no column for carrier", nil},
		{"no header", "", "Sprint", "t: empty file", nil},
		{"no seq", "a,b\n1,2\n", "Sprint", "t:1: header has no seq_num", nil},
		{"seq gap closed up", hdr + "TCP,8,0,1,1,1\nTCP,8,7,2,1,1\n", "Sprint", "", []BitRate{1_000_000, 2_000_000}},
		{"seq decreasing", hdr + "TCP,8,1,1,1,1\nTCP,8,1,1,1,1\n", "Sprint", "t:3: seq_num 1 does not increase", nil},
		{"bad number", hdr + "TCP,8,0,x,1,1\n", "Sprint", "t:2: Sprint_throughput_mbps", nil},
		{"negative", hdr + "TCP,8,0,-1,1,1\n", "Sprint", "t:2: Sprint_throughput_mbps", nil},
		{"short row", hdr + "TCP,8,0\n", "Sprint", "t:2:", nil},
		{"no rows", hdr, "Sprint", "t: no rows", nil},
		{"all zero", hdr + "TCP,8,0,0,1,1\n", "Sprint", "capacity is zero", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse5GophersCSV(strings.NewReader(tc.in), "t", tc.carrier)
			checkParse(t, err, tc.err)
			if err == nil {
				if s.Interval != time.Second || fmt.Sprint(s.Rate) != fmt.Sprint(tc.want) {
					t.Errorf("got %v every %v, want %v", s.Rate, s.Interval, tc.want)
				}
			}
		})
	}
}

func TestParseRTTSamples(t *testing.T) {
	good := "rtt_ms,carrier,server_location\n40.0,SPRINT,US-East\n37.5,SPRINT,US-West\n80,TMOBILE,US-East\n"
	tests := []struct {
		name, in, carrier, loc string
		err                    string
		want                   []time.Duration
	}{
		{"all sprint", good, "sprint", "", "", []time.Duration{40 * time.Millisecond, 37500 * time.Microsecond}},
		{"east sprint", good, "SPRINT", "us-east", "", []time.Duration{40 * time.Millisecond}},
		{"t-mobile", good, "T-Mobile", "", "", []time.Duration{80 * time.Millisecond}},
		{"none", good, "VERIZON", "", "t: no RTT samples", nil},
		{"bad rtt", good + "x,SPRINT,US-East\n", "SPRINT", "", "t:5: rtt_ms", nil},
		{"bad header", "a,b,c\n1,2,3\n", "SPRINT", "", "t:1: header must name", nil},
		{"ragged", good + "1,SPRINT\n", "SPRINT", "", "t:5:", nil},
		{"empty", "", "SPRINT", "", "t: empty file", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRTTSamples(strings.NewReader(tc.in), "t", tc.carrier, tc.loc)
			checkParse(t, err, tc.err)
			if err == nil && fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSeriesLink replays a synthetic series: capacity per interval, OWD
// and loss.
func TestSeriesLink(t *testing.T) {
	capacity := &Series{
		Name:     "synth",
		Interval: 100 * time.Millisecond,
		Rate:     []BitRate{8 * Mbps, 0, 16 * Mbps, 4 * Mbps},
		Loss:     []float64{0, 0, 0.5, 0},
	}
	withOWD := *capacity
	withOWD.OWD = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}
	// Saturate for 100 loops with 1500-byte packets every 0.5 ms
	// (24 Mbit/s) through two links that differ only in OWD: same seed,
	// same loss draws, same queue.
	a, err := NewLink(LinkConfig{Series: capacity, QueueDelay: 300 * time.Millisecond}, 9)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLink(LinkConfig{Series: &withOWD, QueueDelay: 300 * time.Millisecond, Reorder: true}, 9)
	if err != nil {
		t.Fatal(err)
	}
	const loops = 100
	s := capacity
	dur := loops * s.Period()
	var bits [4]float64
	var lost, offered [4]int
	for at := time.Duration(0); at < dur; at += 500 * time.Microsecond {
		k := s.index(at)
		offered[k]++
		dep, d := a.Send(at, 1500)
		rel, d2 := b.Send(at, 1500)
		if d != d2 {
			t.Fatalf("at %v: drops differ: %v vs %v", at, d, d2)
		}
		switch d {
		case DropLoss:
			lost[k]++
		case Delivered:
			j := s.index(dep)
			bits[j] += 1500 * 8
			if rel-dep != withOWD.OWD[j] {
				t.Fatalf("packet leaving at %v (interval %d): OWD %v, want %v", dep, j, rel-dep, withOWD.OWD[j])
			}
		}
	}
	for j, r := range s.Rate {
		got := bits[j] / (loops * s.Interval.Seconds())
		// A packet straddling an interval boundary is counted in the
		// interval where it ends: ± one packet per interval (12 kbit per
		// 100 ms = 0.12 Mbit/s), tolerance 0.2 Mbit/s.
		if math.Abs(got-float64(r)) > 0.2e6 {
			t.Errorf("interval %d: delivered %.3g bit/s, want %v", j, got, r)
		}
	}
	// Loss 0.5 in interval 2 only: 100 loops × 200 packets; 4 se ≈ 0.014.
	if p := float64(lost[2]) / float64(offered[2]); math.Abs(p-0.5) > 0.015 {
		t.Errorf("loss in interval 2: %.3f, want 0.5", p)
	}
	if lost[0]+lost[1]+lost[3] != 0 {
		t.Errorf("loss outside interval 2: %v", lost)
	}
}

func TestSeriesRealTraces(t *testing.T) {
	dir := tracesDirOrSkip(t)
	lagos := filepath.Join(dir, "leo", "starlink-100ms-lagos", "lagos.csv")
	for _, d := range []Direction{Up, Down} {
		s, err := LoadStarlinkCSV(lagos, d)
		if err != nil {
			t.Fatal(err)
		}
		// The shared data README gives 5445 s (54450 rows), mean 9.5 (UL)
		// and 94.3 (DL) Mbit/s.
		want := map[Direction]float64{Up: 9.5, Down: 94.3}[d]
		if s.Len() != 54450 || math.Abs(s.MeanRate().Mbit()-want) > 0.05 {
			t.Errorf("%s: %d rows, mean %.2f Mbit/s; want 54450, %.1f", d, s.Len(), s.MeanRate().Mbit(), want)
		}
		// Replay: saturate 60 s of uplink and compare with the trace.
		if d == Up {
			got := saturate(t, LinkConfig{Series: s, QueueDelay: time.Second}, 60*time.Second, 100*time.Microsecond)
			want := float64(s.Truncate(600).MeanRate())
			if math.Abs(got-want) > 0.01*want {
				t.Errorf("replayed %.3g bit/s over 60 s, trace says %.3g", got, want)
			}
		}
	}
	for _, c := range []struct {
		carrier string
		mean    float64 // README: car-driving-trace-1.csv
	}{{"Sprint", 264.9}, {"TMobile", 97.1}, {"Verizon", 274.9}} {
		s, err := Load5GophersCSV(filepath.Join(dir, "cellular", "5gophers", "car-driving-trace-1.csv"), c.carrier)
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != 120 || math.Abs(s.MeanRate().Mbit()-c.mean) > 0.05 {
			t.Errorf("%s: %d s, mean %.2f; want 120, %.1f", c.carrier, s.Len(), s.MeanRate().Mbit(), c.mean)
		}
	}
	for _, c := range []struct {
		carrier string
		mean    float64 // README: all-carriers-rtt.csv
	}{{"SPRINT", 62.9}, {"TMOBILE", 113.5}, {"VERIZON", 80.5}} {
		rtts, err := LoadRTTSamples(filepath.Join(dir, "cellular", "5gophers", "all-carriers-rtt.csv"), c.carrier, "")
		if err != nil {
			t.Fatal(err)
		}
		var sum time.Duration
		for _, r := range rtts {
			sum += r
		}
		if m := (sum / time.Duration(len(rtts))).Seconds() * 1000; len(rtts) != 240 || math.Abs(m-c.mean) > 0.05 {
			t.Errorf("%s: %d samples, mean %.2f ms; want 240, %.1f", c.carrier, len(rtts), m, c.mean)
		}
	}
}

// Fuzz targets: the parsers never panic, and whatever they accept is a
// valid trace.

func FuzzParseMahimahi(f *testing.F) {
	for _, s := range []string{"1\n", "0\n1\n1\n5\n", "", "\n", "1\n0\n", "x", "4294967295\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseMahimahi(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		if err := tr.validate(); err != nil {
			t.Fatalf("accepted an invalid trace: %v", err)
		}
		l, err := NewLink(LinkConfig{Mahimahi: tr}, 1)
		if err != nil {
			t.Fatal(err)
		}
		l.Send(0, 1500)
		l.Send(time.Duration(tr.Opportunities[0])*time.Millisecond, 3000)
	})
}

func FuzzParseStarlinkCSV(f *testing.F) {
	for _, s := range []string{"26.5,48.1,83.8,88.3,0.0,0.01,0\n10,20,80,90,0.5,0,100\n", "1,2,3,4,0,0,0", "", "a,b", "1,2,3,4,5,6,7\n"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, down bool) {
		d := Up
		if down {
			d = Down
		}
		s, err := ParseStarlinkCSV(bytes.NewReader(b), "fuzz", d)
		if err != nil {
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("accepted an invalid series: %v", err)
		}
		if _, err := NewLink(LinkConfig{Series: s}, 1); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParse5GophersCSV(f *testing.F) {
	hdr := "protocol,num_tcp_conn,seq_num,Sprint_throughput_mbps,TMobile_throughput_mbps,Verizon_throughput_mbps\n"
	for _, s := range []string{hdr + "TCP,8,0,25.7,145.75,53.4\n", hdr, "", "seq_num,tmobile_throughput_mbps\n0,1\n"} {
		f.Add([]byte(s), "TMobile")
	}
	f.Fuzz(func(t *testing.T, b []byte, carrier string) {
		s, err := Parse5GophersCSV(bytes.NewReader(b), "fuzz", carrier)
		if err != nil {
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("accepted an invalid series: %v", err)
		}
	})
}

func FuzzParseRTTSamples(f *testing.F) {
	for _, s := range []string{"rtt_ms,carrier,server_location\n40.0,SPRINT,US-East\n", "", "rtt_ms,carrier\n1,x\n"} {
		f.Add([]byte(s), "SPRINT", "")
	}
	f.Fuzz(func(t *testing.T, b []byte, carrier, loc string) {
		rtts, err := ParseRTTSamples(bytes.NewReader(b), "fuzz", carrier, loc)
		if err != nil {
			return
		}
		if len(rtts) == 0 {
			t.Fatal("no samples and no error")
		}
		for _, r := range rtts {
			if r < 0 {
				t.Fatalf("negative RTT %v", r)
			}
		}
	})
}
