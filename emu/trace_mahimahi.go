package emu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MahimahiOpportunityBytes is the size of one delivery opportunity of a
// Mahimahi packet-delivery trace: one MTU-sized IP packet. (mm-link counts
// 1504 bytes because its TUN frames carry a 4-byte header in front of the
// IP packet; emu counts IP bytes, so the same opportunity is 1500.)
const MahimahiOpportunityBytes = 1500

// MahimahiTrace is a packet-delivery trace in the format of Mahimahi's
// mm-link (Netravali et al., USENIX ATC 2015; traces recorded with
// Saturator, Winstein et al., NSDI 2013): each line is a millisecond
// timestamp at which one [MahimahiOpportunityBytes]-byte delivery
// opportunity exists; a timestamp repeated k times means k opportunities in
// that millisecond. The trace loops with a period equal to its last
// timestamp, as mm-link does.
//
// A MahimahiTrace is immutable after parsing and may be shared by any
// number of Links.
type MahimahiTrace struct {
	// Name is the file name the trace was read from (for messages).
	Name string
	// Opportunities are the timestamps in ms, non-decreasing, the last one
	// positive.
	Opportunities []uint32
}

// Period returns the loop length of the trace, its last timestamp.
func (m *MahimahiTrace) Period() time.Duration {
	return time.Duration(m.Opportunities[len(m.Opportunities)-1]) * time.Millisecond
}

// MeanRate returns the capacity of one loop of the trace:
// opportunities × 1500 B × 8 / period.
func (m *MahimahiTrace) MeanRate() BitRate {
	return BitRate(float64(len(m.Opportunities)) * MahimahiOpportunityBytes * 8 / m.Period().Seconds())
}

func (m *MahimahiTrace) validate() error {
	if m == nil || len(m.Opportunities) == 0 {
		return invalidf("mahimahi trace is empty")
	}
	prev := uint32(0)
	for _, o := range m.Opportunities {
		if o < prev {
			return invalidf("mahimahi trace %s: timestamps decrease", m.Name)
		}
		prev = o
	}
	if prev == 0 {
		return invalidf("mahimahi trace %s must last a nonzero time", m.Name)
	}
	return nil
}

// opTime returns the trace time of global opportunity k (k counts across
// loops: k = loop·len + index).
func (m *MahimahiTrace) opTime(k int64) time.Duration {
	n := int64(len(m.Opportunities))
	loop, idx := k/n, k%n
	return time.Duration(loop)*m.Period() + time.Duration(m.Opportunities[idx])*time.Millisecond
}

// firstAfter returns the global index of the first opportunity whose time
// is strictly after trace time t (t ≥ 0). mm-link processes the
// opportunities of millisecond now before it enqueues a packet arriving in
// that millisecond, so a packet arriving at t can use only opportunities at
// times > t.
func (m *MahimahiTrace) firstAfter(t time.Duration) int64 {
	n := int64(len(m.Opportunities))
	period := m.Period()
	loop := int64(t / period)
	within := t - time.Duration(loop)*period
	idx := sort.Search(int(n), func(i int) bool {
		return time.Duration(m.Opportunities[i])*time.Millisecond > within
	})
	return loop*n + int64(idx)
}

// maxTraceLine bounds the length of a trace line; longer lines are errors.
const maxTraceLine = 4096

// ParseMahimahi reads a Mahimahi packet-delivery trace. name is used in
// errors only. It follows mm-link's rules: every line is a non-negative
// integer number of ms (surrounding blanks and a trailing CR are ignored),
// empty lines are errors, timestamps never decrease, and the last one is
// positive. Errors are *[ParseError] with the line number.
func ParseMahimahi(r io.Reader, name string) (*MahimahiTrace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxTraceLine)
	tr := &MahimahiTrace{Name: name}
	line := 0
	var prev uint32
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			return nil, &ParseError{File: name, Line: line, Err: errors.New("empty line")}
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("want a timestamp in ms, have %q", clip(s))}
		}
		ms := uint32(v)
		if ms < prev {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("timestamp %d ms is before the previous one (%d ms); timestamps must not decrease", ms, prev)}
		}
		prev = ms
		tr.Opportunities = append(tr.Opportunities, ms)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{File: name, Line: line + 1, Err: errors.New("line too long")}
		}
		return nil, &ParseError{File: name, Line: line, Err: err}
	}
	if len(tr.Opportunities) == 0 {
		return nil, &ParseError{File: name, Err: errors.New("no timestamps")}
	}
	if prev == 0 {
		return nil, &ParseError{File: name, Line: line, Err: errors.New("trace must last a nonzero time (last timestamp is 0)")}
	}
	return tr, nil
}

// LoadMahimahi reads the Mahimahi trace file at path (see [ParseMahimahi]).
func LoadMahimahi(path string) (*MahimahiTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseMahimahi(f, path)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
