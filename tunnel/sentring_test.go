package tunnel

import (
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go/qlog"
)

// fakeLossSink records the losses a recorder infers.
type fakeLossSink struct {
	sizes  []int
	probes int
}

func (f *fakeLossSink) datagramLost(size int, probe bool) {
	f.sizes = append(f.sizes, size)
	if probe {
		f.probes++
	}
}

// TestRecorderInfersSilentLosses replays what quic-go's probe timeout does
// to a burst of datagrams sent into a hole (sentring.go): the packets
// leave its history without a PacketLost event, two PINGs follow and are
// acknowledged. The recorder must call every datagram packet below the
// largest acknowledged lost once it is older than the loss delay, never a
// packet without a datagram, never one acknowledged or already reported
// by quic-go, never one sent within the loss delay; a later loss event for
// a packet it inferred is no news.
func TestRecorderInfersSilentLosses(t *testing.T) {
	const delay = 2 * time.Millisecond
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	type send struct {
		pn    int64
		size  int // 0: no datagram (a PING, an ACK-only packet)
		probe bool
		ms    float64
	}
	burst := func(from, to int64, size int, ms float64) []send {
		var s []send
		for pn := from; pn <= to; pn++ {
			s = append(s, send{pn: pn, size: size, ms: ms})
		}
		return s
	}
	ack := func(r ...int64) []qlog.AckRange { // pairs of largest, smallest
		var out []qlog.AckRange
		for i := 0; i+1 < len(r); i += 2 {
			out = append(out, qlog.AckRange{Largest: qlog.PacketNumber(r[i]), Smallest: qlog.PacketNumber(r[i+1])})
		}
		return out
	}
	type step struct {
		sends     []send
		quicLost  []int64 // quic-go's PacketLost events before the ACK
		ack       []qlog.AckRange
		ackMs     float64
		wantLost  []int // sizes inferred lost by this ACK
		wantNews  []bool
		wantProbe int
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"PTO after a burst into a hole", []step{
			{sends: append(burst(0, 4, 1322, 1), send{pn: 5, ms: 30}, send{pn: 6, ms: 30}),
				ack: ack(6, 5), ackMs: 31, wantLost: []int{1322, 1322, 1322, 1322, 1322}},
		}},
		{"sent within the loss delay: later", []step{
			{sends: append(burst(0, 2, 1322, 10), send{pn: 3, ms: 10.5}), ack: ack(3, 3), ackMs: 11},
			{sends: []send{{pn: 4, ms: 20}}, ack: ack(4, 3), ackMs: 21, wantLost: []int{1322, 1322, 1322}},
		}},
		{"acknowledged around a gap", []step{
			{sends: []send{{pn: 0, size: 1200, ms: 1}, {pn: 1, size: 1322, ms: 1}, {pn: 2, size: 300, ms: 1}, {pn: 3, size: 1322, probe: true, ms: 1}, {pn: 4, size: 1200, ms: 1}},
				ack: ack(4, 4, 2, 2, 0, 0), ackMs: 10, wantLost: []int{1322, 1322}, wantProbe: 1},
		}},
		{"packets without a datagram are never inferred", []step{
			{sends: []send{{pn: 0, ms: 1}, {pn: 1, ms: 1}, {pn: 2, size: 48, ms: 1}}, ack: ack(2, 2), ackMs: 10},
		}},
		{"quic-go's own loss first: counted once", []step{
			{sends: burst(0, 3, 1322, 1), quicLost: []int64{1}, wantNews: []bool{true}, ack: ack(3, 3), ackMs: 10, wantLost: []int{1322, 1322}},
			{quicLost: []int64{0, 2, 3}, wantNews: []bool{false, false, false}},
		}},
		{"an older ACK frame infers nothing", []step{
			{sends: burst(0, 5, 1322, 1), ack: ack(5, 5), ackMs: 2},
			{ack: ack(3, 3), ackMs: 50},
			{ack: ack(5, 5), ackMs: 50, wantLost: []int{1322, 1322, 1322, 1322}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			var pm pathPMTU
			pm.init(testMTU+HeaderBudget, PathOptions{}, t0)
			for i, s := range c.steps {
				for _, x := range s.sends {
					r.noteSent(x.pn, x.probe, x.size, at(x.ms).UnixNano())
				}
				for j, pn := range s.quicLost {
					if _, _, news := r.noteLost(pn); news != s.wantNews[j] {
						t.Errorf("step %d: quic-go's loss of %d is news: %v, want %v", i, pn, news, s.wantNews[j])
					}
				}
				var sink fakeLossSink
				if s.ack != nil {
					r.noteAcks(&qlog.AckFrame{AckRanges: s.ack}, &pm, at(s.ackMs), delay, &sink)
				}
				if !slices.Equal(sink.sizes, s.wantLost) || sink.probes != s.wantProbe {
					t.Errorf("step %d: inferred lost %v (%d probes), want %v (%d)", i, sink.sizes, sink.probes, s.wantLost, s.wantProbe)
				}
			}
		})
	}
}
