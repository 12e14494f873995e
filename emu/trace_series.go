package emu

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Direction names one direction of a link. Up is client→upstream (for
// bondd's paths: edge→concentrator), Down is upstream→client.
type Direction uint8

const (
	Up   Direction = iota // client → upstream (edge → concentrator)
	Down                  // upstream → client (concentrator → edge)
)

// String returns "up" or "down".
func (d Direction) String() string {
	if d == Down {
		return "down"
	}
	return "up"
}

// Series is a time series of link conditions in fixed intervals: capacity,
// one-way delay and loss rate, any of which may be absent (nil). All
// present slices have the same length n; the series loops with period
// n·Interval. Interval i covers trace time [i·Interval, (i+1)·Interval).
//
// Within a Link, Rate makes the series the bottleneck (a time-varying rate
// server), OWD is added to the delay of packets leaving the bottleneck in
// that interval, and Loss is the Bernoulli loss probability of packets
// arriving in that interval.
//
// A Series is immutable once built and may be shared by any number of
// Links.
type Series struct {
	Name     string          // source file or model name (for messages)
	Interval time.Duration   // length of one interval, > 0
	Rate     []BitRate       // capacity per interval, bits/s ≥ 0; nil: no capacity information
	OWD      []time.Duration // one-way delay per interval ≥ 0; nil: none
	Loss     []float64       // loss probability per interval in [0, 1]; nil: none
}

// Len returns the number of intervals.
func (s *Series) Len() int { return max(len(s.Rate), len(s.OWD), len(s.Loss)) }

// Period returns the loop length Len()·Interval.
func (s *Series) Period() time.Duration { return time.Duration(s.Len()) * s.Interval }

// MeanRate returns the mean capacity over one loop (0 without Rate).
func (s *Series) MeanRate() BitRate {
	if len(s.Rate) == 0 {
		return 0
	}
	var sum float64
	for _, r := range s.Rate {
		sum += float64(r)
	}
	return BitRate(sum / float64(len(s.Rate)))
}

// Truncate returns a copy of s cut to its first n intervals (n ≥ 1 and
// ≤ Len). The slices are shared, not copied.
func (s *Series) Truncate(n int) *Series {
	c := *s
	if n < 1 || n > s.Len() {
		return &c
	}
	if c.Rate != nil {
		c.Rate = c.Rate[:n]
	}
	if c.OWD != nil {
		c.OWD = c.OWD[:n]
	}
	if c.Loss != nil {
		c.Loss = c.Loss[:n]
	}
	return &c
}

// index returns the interval index of trace time t ≥ 0.
func (s *Series) index(t time.Duration) int {
	return int((t / s.Interval) % time.Duration(s.Len()))
}

func (s *Series) validate() error {
	if s.Interval <= 0 {
		return invalidf("series %s: interval %v must be positive", s.Name, s.Interval)
	}
	n := s.Len()
	if n == 0 {
		return invalidf("series %s is empty", s.Name)
	}
	for _, l := range []int{len(s.Rate), len(s.OWD), len(s.Loss)} {
		if l != 0 && l != n {
			return invalidf("series %s: columns have different lengths", s.Name)
		}
	}
	var total float64
	for _, r := range s.Rate {
		if r < 0 {
			return invalidf("series %s: negative rate", s.Name)
		}
		total += float64(r)
	}
	if s.Rate != nil && total == 0 {
		return invalidf("series %s: capacity is zero everywhere", s.Name)
	}
	for _, d := range s.OWD {
		if d < 0 {
			return invalidf("series %s: negative delay", s.Name)
		}
	}
	for _, p := range s.Loss {
		if !isProb(p) {
			return invalidf("series %s: loss %v outside [0, 1]", s.Name, p)
		}
	}
	return nil
}

// StarlinkInterval is the row interval of the Starlink 100-ms trace format.
const StarlinkInterval = 100 * time.Millisecond

// ParseStarlinkCSV reads a Starlink 100-ms trace (the lagos.csv format of
// the Starlink-Emulator repository, measured by Pan, Zhao and Cai, IEEE ICC
// 2024): CSV without header, one row per interval,
//
//	uplink_Mbps,downlink_Mbps,uplink_owd_ms,downlink_owd_ms,uplink_loss_frac,downlink_loss_frac,wall_time_ms
//
// and returns the columns of direction dir (Up: uplink, Down: downlink) as
// a Series with Rate, OWD and Loss. wall_time_ms must start at a multiple
// of the interval, increase by the same step on every row (the step is the
// Interval; 100 ms if there is a single row). name is used in errors only;
// errors are *[ParseError] with the line number.
func ParseStarlinkCSV(r io.Reader, name string, dir Direction) (*Series, error) {
	cr := newCSV(r, 7)
	s := &Series{Name: name, Interval: StarlinkInterval}
	rc, oc, lc := 0, 2, 4
	if dir == Down {
		rc, oc, lc = 1, 3, 5
	}
	var first, prev float64
	for row := 0; ; row++ {
		rec, line, err := readCSV(cr, name)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var v [7]float64
		for i := range v {
			v[i], err = strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil || math.IsNaN(v[i]) || math.IsInf(v[i], 0) || v[i] < 0 {
				return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("column %d: want a finite number ≥ 0, have %q", i+1, clip(rec[i]))}
			}
		}
		if v[lc] > 1 {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("column %d: loss fraction %v > 1", lc+1, v[lc])}
		}
		if v[rc] > 1e6 || v[oc] > 1e7 || v[6] > 1e15 {
			return nil, &ParseError{File: name, Line: line, Err: errors.New("value out of range")}
		}
		switch row {
		case 0:
			first = v[6]
		case 1:
			step := v[6] - first
			if step <= 0 || step != math.Trunc(step) {
				return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("wall_time_ms %v does not increase by whole ms from %v", v[6], first)}
			}
			s.Interval = time.Duration(step) * time.Millisecond
		default:
			if v[6]-prev != float64(s.Interval/time.Millisecond) {
				return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("wall_time_ms %v: rows must be %v apart (previous %v)", v[6], s.Interval, prev)}
			}
		}
		prev = v[6]
		s.Rate = append(s.Rate, BitRate(v[rc]*1e6))
		s.OWD = append(s.OWD, time.Duration(v[oc]*float64(time.Millisecond)))
		s.Loss = append(s.Loss, v[lc])
	}
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: errors.New("no rows")}
	}
	var total BitRate
	for _, r := range s.Rate {
		total += r
	}
	if total == 0 {
		return nil, &ParseError{File: name, Err: fmt.Errorf("%s capacity is zero in every row", dir)}
	}
	return s, nil
}

// LoadStarlinkCSV reads the Starlink trace file at path (see
// [ParseStarlinkCSV]).
func LoadStarlinkCSV(path string, dir Direction) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseStarlinkCSV(f, path, dir)
}

// Carriers of the 5Gophers traces, as spelled in their column names.
var fiveGophersCarriers = []string{"Sprint", "TMobile", "Verizon"}

// canonCarrier maps "T-Mobile", "tmobile", "TMOBILE" … to "tmobile".
func canonCarrier(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("-", "", "_", "", " ", "", "&", "").Replace(s)
}

// Parse5GophersCSV reads a 5Gophers 1.0 driving trace (Narayanan et al.,
// "A First Look at Commercial 5G Performance on Smartphones", WWW 2020;
// files car-driving-trace-*.csv): a CSV with header
//
//	protocol,num_tcp_conn,seq_num,Sprint_throughput_mbps,TMobile_throughput_mbps,Verizon_throughput_mbps
//
// and one row per second. It returns the throughput column of carrier
// (Sprint, TMobile or Verizon; case, '-' and '_' are ignored) as a Series of
// 1-s intervals with Rate only, one interval per row. seq_num must
// increase; where it skips (the published files lack a few seconds, e.g.
// 103–108 of car-driving-trace-1.csv) the gap is closed up, as the
// dataset's per-second statistics do. name is used in errors only; errors
// are *[ParseError].
func Parse5GophersCSV(r io.Reader, name, carrier string) (*Series, error) {
	cr := newCSV(r, -1)
	hdr, line, err := readHeader(cr, name)
	if err != nil {
		return nil, err
	}
	seqCol, rateCol := -1, -1
	want := canonCarrier(carrier) + "throughputmbps"
	for i, h := range hdr {
		switch c := canonCarrier(h); c {
		case "seqnum":
			seqCol = i
		case want:
			rateCol = i
		}
	}
	if seqCol < 0 {
		return nil, &ParseError{File: name, Line: line, Err: errors.New("header has no seq_num column")}
	}
	if rateCol < 0 {
		return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("header has no column for carrier %q (have %s)", carrier, strings.Join(fiveGophersCarriers, ", "))}
	}
	s := &Series{Name: name, Interval: time.Second}
	hdr = slices.Clone(hdr) // the reader reuses its record
	var prevSeq int64
	for row := 0; ; row++ {
		rec, line, err := readRow(cr, name, len(hdr))
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		seq, err := strconv.ParseInt(strings.TrimSpace(rec[seqCol]), 10, 64)
		if err != nil {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("seq_num: want an integer, have %q", clip(rec[seqCol]))}
		}
		if row > 0 && seq <= prevSeq {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("seq_num %d does not increase (previous %d)", seq, prevSeq)}
		}
		prevSeq = seq
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[rateCol]), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 1e6 {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("%s: want a throughput in Mbit/s in [0, 1e6], have %q", hdr[rateCol], clip(rec[rateCol]))}
		}
		s.Rate = append(s.Rate, BitRate(v*1e6))
	}
	if len(s.Rate) == 0 {
		return nil, &ParseError{File: name, Err: errors.New("no rows")}
	}
	if err := s.validate(); err != nil {
		return nil, &ParseError{File: name, Err: fmt.Errorf("carrier %s: capacity is zero in every row", carrier)}
	}
	return s, nil
}

// Load5GophersCSV reads the 5Gophers driving trace at path (see
// [Parse5GophersCSV]).
func Load5GophersCSV(path, carrier string) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse5GophersCSV(f, path, carrier)
}

// ParseRTTSamples reads the 5Gophers RTT samples (all-carriers-rtt.csv: a
// CSV with header rtt_ms,carrier,server_location) and returns the RTTs of
// carrier (SPRINT, TMOBILE or VERIZON; case, '-' and '_' are ignored),
// restricted to server location loc (e.g. "US-East") unless loc is empty,
// in file order. The samples are not a time series. name is used in errors
// only; errors are *[ParseError]; no matching sample is an error.
func ParseRTTSamples(r io.Reader, name, carrier, loc string) ([]time.Duration, error) {
	cr := newCSV(r, -1)
	hdr, line, err := readHeader(cr, name)
	if err != nil {
		return nil, err
	}
	hdr = slices.Clone(hdr) // the reader reuses its record
	rttCol, carCol, locCol := -1, -1, -1
	for i, h := range hdr {
		switch canonCarrier(h) {
		case "rttms":
			rttCol = i
		case "carrier":
			carCol = i
		case "serverlocation":
			locCol = i
		}
	}
	if rttCol < 0 || carCol < 0 || (loc != "" && locCol < 0) {
		return nil, &ParseError{File: name, Line: line, Err: errors.New("header must name rtt_ms, carrier and server_location")}
	}
	want := canonCarrier(carrier)
	var out []time.Duration
	for {
		rec, line, err := readRow(cr, name, len(hdr))
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[rttCol]), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 1e7 {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("rtt_ms: want a number of ms in [0, 1e7], have %q", clip(rec[rttCol]))}
		}
		if canonCarrier(rec[carCol]) != want {
			continue
		}
		if loc != "" && !strings.EqualFold(strings.TrimSpace(rec[locCol]), loc) {
			continue
		}
		out = append(out, time.Duration(v*float64(time.Millisecond)))
	}
	if len(out) == 0 {
		where := ""
		if loc != "" {
			where = " at " + loc
		}
		return nil, &ParseError{File: name, Err: fmt.Errorf("no RTT samples for carrier %q%s", carrier, where)}
	}
	return out, nil
}

// LoadRTTSamples reads the 5Gophers RTT file at path (see
// [ParseRTTSamples]).
func LoadRTTSamples(path, carrier, loc string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseRTTSamples(f, path, carrier, loc)
}

func newCSV(r io.Reader, fields int) *csv.Reader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = fields
	cr.ReuseRecord = true
	cr.Comment = 0
	return cr
}

// readHeader is readCSV for the header row: an empty file is a
// *ParseError too.
func readHeader(cr *csv.Reader, name string) ([]string, int, error) {
	hdr, line, err := readCSV(cr, name)
	if err == io.EOF {
		return nil, 0, &ParseError{File: name, Err: errors.New("empty file, want a header")}
	}
	return hdr, line, err
}

// readRow is readCSV for a data row under a header of fields fields: a row
// with another number of fields is a *ParseError.
func readRow(cr *csv.Reader, name string, fields int) ([]string, int, error) {
	rec, line, err := readCSV(cr, name)
	if err == nil && len(rec) != fields {
		return nil, line, &ParseError{File: name, Line: line, Err: fmt.Errorf("have %d fields, header has %d", len(rec), fields)}
	}
	return rec, line, err
}

// readCSV reads one record and returns it with its line number; errors are
// *ParseError, end of input is io.EOF.
func readCSV(cr *csv.Reader, name string) ([]string, int, error) {
	rec, err := cr.Read()
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, pe.Line, &ParseError{File: name, Line: pe.Line, Err: pe.Err}
		}
		return nil, 0, &ParseError{File: name, Err: err}
	}
	line, _ := cr.FieldPos(0)
	return rec, line, nil
}
