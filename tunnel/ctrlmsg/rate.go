package ctrlmsg

// TypeRateFeedback is PATH_RATE_FEEDBACK, bondd's own message (no MoMQ code
// point): a receiver's report on one path, sent by either end.
const TypeRateFeedback = "path_rate_feedback"

// CapRate is the "rate" capability: PATH_RATE_FEEDBACK in both directions,
// and datagrams that carry the per-path sequence number (the FlagPathSeq
// header flag of package tunnel). A peer that did not negotiate it gets
// neither.
const CapRate Caps = 1 << 4

// RateFeedback is PATH_RATE_FEEDBACK: what the receiver saw of one path
// over one interval, about every 50 ms (draft-ietf-rmcat-gcc-02 §5, RFC
// 8888 §3 for the feedback cadence). The
// fields are those of policy.RateReport: times and one-way delays in µs
// on the receiver's clock (the delays include the unknown clock offset),
// sequence numbers the path's FlagPathSeq numbers mod 2^32.
type RateFeedback struct {
	Type string `json:"type"` // TypeRateFeedback
	// Path is the uplink name the report is about, 1..MaxNameLen bytes.
	Path string `json:"path"`
	// StartUs and EndUs bound the interval; EndUs ≥ StartUs, and at most
	// MaxRateInterval µs apart.
	StartUs uint64 `json:"start_us"`
	EndUs   uint64 `json:"end_us"`
	// Bytes and Datagrams are what arrived; Lost the datagrams missing
	// from gaps in the path's sequence (at most MaxRateDatagrams each).
	Bytes     uint32 `json:"bytes"`
	Datagrams uint32 `json:"datagrams"`
	Lost      uint32 `json:"lost"`
	// HighestSeq is the highest per-path sequence number seen.
	HighestSeq uint32 `json:"highest_seq"`
	// OWDMinUs and OWDMeanUs are the least and mean one-way delay;
	// OWDMeanUs ≥ OWDMinUs.
	OWDMinUs  int64 `json:"owd_min_us"`
	OWDMeanUs int64 `json:"owd_mean_us"`
}

// MessageType implements Message.
func (*RateFeedback) MessageType() string { return TypeRateFeedback }

// Bounds of a RateFeedback.
const (
	// MaxRateInterval is the longest interval a report may cover, µs (a
	// minute: a report covers about 50 ms).
	MaxRateInterval = 60_000_000
	// MaxRateDatagrams bounds Datagrams and Lost (2^26, more than a
	// minute at 10 Gbit/s of 1280-byte datagrams).
	MaxRateDatagrams = 1 << 26
)

// ParseRateFeedback parses and checks a PATH_RATE_FEEDBACK body: a valid
// path name, an interval that does not end before it starts and is at most
// MaxRateInterval long, counts within MaxRateDatagrams, a mean delay not
// below the minimum. The result does not retain body.
func ParseRateFeedback(body []byte) (*RateFeedback, error) {
	var m RateFeedback
	if err := decode(body, TypeRateFeedback, &m, &m.Type); err != nil {
		return nil, err
	}
	switch {
	case !ValidName(m.Path):
		return nil, badf("rate feedback: path name empty or too long")
	case m.EndUs < m.StartUs || m.EndUs-m.StartUs > MaxRateInterval:
		return nil, badf("rate feedback: interval %d..%d µs", m.StartUs, m.EndUs)
	case m.Datagrams > MaxRateDatagrams || m.Lost > MaxRateDatagrams:
		return nil, badf("rate feedback: %d datagrams, %d lost", m.Datagrams, m.Lost)
	case m.OWDMeanUs < m.OWDMinUs:
		return nil, badf("rate feedback: mean delay below the minimum")
	}
	return &m, nil
}
