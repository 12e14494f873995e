package usage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// Key names one counted path: Bond is the edge's id (on the edge, its
// own; on the concentrator, the edge's), Path the uplink's name.
type Key struct {
	Bond string `json:"bond"`
	Path string `json:"path"`
}

// Counts are one path's traffic over some time: an hour of history, a
// period, or a lifetime. Wire bytes are IP + UDP + QUIC (see Overhead).
type Counts struct {
	UpBytes     uint64 `json:"up_bytes"`     // sent on the wire, bytes
	DownBytes   uint64 `json:"down_bytes"`   // received on the wire, bytes
	UpPackets   uint64 `json:"up_packets"`   // QUIC packets sent
	DownPackets uint64 `json:"down_packets"` // QUIC packets received
	// DatagramBytes are the bondd datagram bytes sent (bondd header and
	// inner packet, parity included): what the labels count.
	DatagramBytes uint64 `json:"datagram_bytes"`
	LostPackets   uint64 `json:"lost_packets"` // QUIC packets declared lost (RFC 9002)
	// ActiveMs, DegradedMs and DownMs are the milliseconds the path spent
	// ACTIVE, DEGRADED and UNAVAILABLE (or not yet known).
	ActiveMs   uint64 `json:"active_ms"`
	DegradedMs uint64 `json:"degraded_ms"`
	DownMs     uint64 `json:"down_ms"`
}

// fields lists c's fields in their encoded order.
func (c *Counts) fields() [9]*uint64 {
	return [9]*uint64{&c.UpBytes, &c.DownBytes, &c.UpPackets, &c.DownPackets, &c.DatagramBytes, &c.LostPackets,
		&c.ActiveMs, &c.DegradedMs, &c.DownMs}
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	f, g := c.fields(), o.fields()
	for i := range f {
		*f[i] += *g[i]
	}
}

// IsZero reports whether every count is 0.
func (c Counts) IsZero() bool { return c == Counts{} }

// recordVersion is the first byte of every encoded record.
const recordVersion = 1

// errRecord is returned for a record that cannot be decoded.
var errRecord = errors.New("malformed record")

// appendCounts appends c as uvarints.
func appendCounts(b []byte, c *Counts) []byte {
	for _, f := range c.fields() {
		b = binary.AppendUvarint(b, *f)
	}
	return b
}

// readCounts decodes what appendCounts wrote from b, returning the rest.
// A record cut short is an error; fields a newer version appends are
// left in the rest.
func readCounts(b []byte, c *Counts) ([]byte, error) {
	for _, f := range c.fields() {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errRecord
		}
		*f, b = v, b[n:]
	}
	return b, nil
}

// sealRecord appends the CRC-32 (IEEE) of the record that starts at
// b[start:], so that a damaged byte anywhere in it is found.
func sealRecord(b []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// openRecord checks and strips the CRC-32 sealRecord appended, and the
// version byte.
func openRecord(b []byte) ([]byte, error) {
	if len(b) < 5 || b[0] != recordVersion {
		return nil, errRecord
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, errRecord
	}
	return body[1:], nil
}

// encodeHour encodes an hour of history: version, the counts, CRC-32.
func encodeHour(b []byte, c *Counts) []byte {
	start := len(b)
	return sealRecord(appendCounts(append(b, recordVersion), c), start)
}

// decodeHour decodes encodeHour's record; bytes after the known fields
// (a newer minor version) are ignored.
func decodeHour(b []byte, c *Counts) error {
	body, err := openRecord(b)
	if err != nil {
		return err
	}
	_, err = readCounts(body, c)
	return err
}

// periodRecord is a path's state: the period [Start, End) it is in, the
// bytes Used against the budget in it, which alerts it has logged, the
// path's lifetime Total since the store was created, the counts of the
// open hour (HourStart), and of the last closed hour (PrevStart) until it
// is in the history (bucket hours): a flush writes one record per path,
// and the closed hours go to the history a few at a time (Accountant.Flush).
type periodRecord struct {
	Start, End time.Time
	Used       uint64
	Alerts     uint8 // alert90, alert100
	Period     Counts
	Total      Counts
	HourStart  time.Time
	Hour       Counts
	PrevStart  time.Time
	Prev       Counts
}

// Alert bits of periodRecord.Alerts.
const (
	alert90  = 1 << 0
	alert100 = 1 << 1
)

func encodePeriod(b []byte, r *periodRecord) []byte {
	start := len(b)
	b = append(b, recordVersion)
	b = binary.AppendVarint(b, r.Start.Unix())
	b = binary.AppendVarint(b, r.End.Unix())
	b = binary.AppendUvarint(b, r.Used)
	b = append(b, r.Alerts)
	b = appendCounts(b, &r.Period)
	b = appendCounts(b, &r.Total)
	b = binary.AppendVarint(b, r.HourStart.Unix())
	b = appendCounts(b, &r.Hour)
	b = binary.AppendVarint(b, r.PrevStart.Unix())
	return sealRecord(appendCounts(b, &r.Prev), start)
}

func decodePeriod(b []byte, r *periodRecord) error {
	b, err := openRecord(b)
	if err != nil {
		return err
	}
	var ts [2]int64
	for i := range ts {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errRecord
		}
		ts[i], b = v, b[n:]
	}
	r.Start, r.End = time.Unix(ts[0], 0).UTC(), time.Unix(ts[1], 0).UTC()
	v, n := binary.Uvarint(b)
	if n <= 0 || len(b) < n+1 {
		return errRecord
	}
	r.Used, r.Alerts, b = v, b[n], b[n+1:]
	if b, err = readCounts(b, &r.Period); err != nil {
		return err
	}
	if b, err = readCounts(b, &r.Total); err != nil {
		return err
	}
	h, n := binary.Varint(b)
	if n <= 0 {
		return errRecord
	}
	r.HourStart = time.Unix(h, 0).UTC()
	if b, err = readCounts(b[n:], &r.Hour); err != nil {
		return err
	}
	if h, n = binary.Varint(b); n <= 0 {
		return errRecord
	}
	r.PrevStart = time.Unix(h, 0).UTC()
	_, err = readCounts(b[n:], &r.Prev)
	return err
}

// appendKey appends k as uvarint length, bond, path.
func appendKey(b []byte, k Key) []byte {
	b = binary.AppendUvarint(b, uint64(len(k.Bond)))
	return append(append(b, k.Bond...), k.Path...)
}

// parseKey decodes appendKey's bytes.
func parseKey(b []byte) (Key, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return Key{}, errRecord
	}
	return Key{Bond: string(b[w : w+int(n)]), Path: string(b[w+int(n):])}, nil
}

// hourKey is the key of an hour of k's history: the hour's Unix seconds,
// 8 bytes big-endian (so keys sort by time and pruning cuts a prefix),
// then k.
// Hours before 1970 are stored as 1970.
func hourKey(b []byte, hour time.Time, k Key) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(max(hour.Unix(), 0)))
	return appendKey(b, k)
}

// parseHourKey decodes hourKey's bytes.
func parseHourKey(b []byte) (time.Time, Key, error) {
	if len(b) < 8 {
		return time.Time{}, Key{}, errRecord
	}
	k, err := parseKey(b[8:])
	return time.Unix(int64(binary.BigEndian.Uint64(b)), 0).UTC(), k, err
}
