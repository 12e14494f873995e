package policy

import (
	"encoding/binary"
	"errors"
	"math"
)

// RateReport is a receiver's feedback about one path over one interval,
// about every 50 ms or once per smoothed RTT (draft-ietf-rmcat-gcc-02 §5:
// feedback every 50–100 ms; compare RFC 8888's per-packet report, of which
// this is a fixed-size aggregate). Times are on the receiver's clock; the
// one-way delays are arrival time minus the header's send timestamp, so
// they include the unknown offset between the hosts' clocks and only their
// changes matter to [RateEstimator].
//
// The wire form ([RateReport.AppendBinary], [RateReport.Parse]) is
// RateReportLen bytes, big-endian, in field order.
type RateReport struct {
	// Start and End bound the interval, µs on the receiver's clock.
	Start, End uint64
	// Bytes is the bytes of datagrams (bondd header included) received
	// on the path in the interval.
	Bytes uint32
	// Datagrams is the number of datagrams received in the interval.
	Datagrams uint32
	// Lost is the number of datagrams found missing from gaps in the
	// path's sequence in the interval, less the late arrivals that filled
	// a gap of the same interval.
	Lost uint32
	// HighestSeq is the highest per-path sequence number seen (serial
	// arithmetic, RFC 1982, mod 2^32).
	HighestSeq uint32
	// OWDMin and OWDMean are the least and the mean one-way delay of the
	// interval's datagrams, µs, offset by the unknown clock difference.
	// Both 0 when Datagrams is 0.
	OWDMin, OWDMean int64
}

// RateReportLen is the length of a RateReport's wire form, bytes.
const RateReportLen = 48

// ErrRateReport is returned by [RateReport.Parse] for input that is not a
// well-formed report: shorter than RateReportLen, an interval that ends
// before it starts, or a mean delay below the minimum. Not fatal: drop the
// message and count it.
var ErrRateReport = errors.New("policy: malformed rate report")

// AppendBinary appends the report's RateReportLen-byte wire form to b. It
// does not allocate when b has room.
func (r *RateReport) AppendBinary(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, r.Start)
	b = binary.BigEndian.AppendUint64(b, r.End)
	b = binary.BigEndian.AppendUint32(b, r.Bytes)
	b = binary.BigEndian.AppendUint32(b, r.Datagrams)
	b = binary.BigEndian.AppendUint32(b, r.Lost)
	b = binary.BigEndian.AppendUint32(b, r.HighestSeq)
	b = binary.BigEndian.AppendUint64(b, uint64(r.OWDMin))
	return binary.BigEndian.AppendUint64(b, uint64(r.OWDMean))
}

// Parse decodes a wire-form report from the first RateReportLen bytes of b
// into r; b is not retained. It returns ErrRateReport (r unchanged) for a
// short or inconsistent report.
func (r *RateReport) Parse(b []byte) error {
	if len(b) < RateReportLen {
		return ErrRateReport
	}
	var x RateReport
	x.Start = binary.BigEndian.Uint64(b[0:])
	x.End = binary.BigEndian.Uint64(b[8:])
	x.Bytes = binary.BigEndian.Uint32(b[16:])
	x.Datagrams = binary.BigEndian.Uint32(b[20:])
	x.Lost = binary.BigEndian.Uint32(b[24:])
	x.HighestSeq = binary.BigEndian.Uint32(b[28:])
	x.OWDMin = int64(binary.BigEndian.Uint64(b[32:]))
	x.OWDMean = int64(binary.BigEndian.Uint64(b[40:]))
	if x.End < x.Start || x.OWDMean < x.OWDMin {
		return ErrRateReport
	}
	*r = x
	return nil
}

// maxSeqJump is the largest forward jump of a per-path sequence counted as
// loss; a larger one (a restarted sender) resynchronises without loss.
const maxSeqJump = 1 << 16

// RateMeter builds a path's [RateReport]s on the receiver: call OnDatagram
// for every datagram received on the path and Report once per feedback
// interval. Time is an argument (µs on the receiver's clock). Not safe for
// concurrent use; the zero value is ready. It does not allocate.
type RateMeter struct {
	start   uint64
	started bool
	bytes   uint32
	n       uint32
	lost    uint32
	highest uint32
	haveSeq bool
	owdMin  int64
	owdSum  int64
}

// OnDatagram records one datagram of size bytes with per-path sequence
// number seq and header send timestamp sendUs (µs, sender's clock),
// received at nowUs (µs, receiver's clock). A gap in the sequence counts
// its missing datagrams as lost; a late datagram that fills a gap of the
// current interval takes one back.
func (m *RateMeter) OnDatagram(nowUs, sendUs uint64, seq uint32, size int) {
	if !m.started {
		m.start, m.started = nowUs, true
	}
	m.bytes += uint32(min(max(size, 0), math.MaxUint16))
	m.n++
	switch d := int32(seq - m.highest); {
	case !m.haveSeq || d > maxSeqJump || d < -maxSeqJump:
		m.highest, m.haveSeq = seq, true
	case d > 0:
		m.lost += uint32(d - 1)
		m.highest = seq
	case d < 0 && m.lost > 0:
		m.lost--
	}
	owd := int64(nowUs - sendUs)
	if m.n == 1 || owd < m.owdMin {
		m.owdMin = owd
	}
	m.owdSum += owd
}

// Report returns the report for the interval that ends at nowUs and starts
// the next one. An interval with no datagram still reports its length (and
// a zero rate).
func (m *RateMeter) Report(nowUs uint64) RateReport {
	start := m.start
	if !m.started || start > nowUs {
		start = nowUs
	}
	r := RateReport{Start: start, End: nowUs, Bytes: m.bytes, Datagrams: m.n, Lost: m.lost, HighestSeq: m.highest}
	if m.n > 0 {
		r.OWDMin = m.owdMin
		r.OWDMean = m.owdSum / int64(m.n)
	}
	m.start, m.started = nowUs, true
	m.bytes, m.n, m.lost, m.owdSum = 0, 0, 0, 0
	return r
}
