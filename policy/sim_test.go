package policy

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/rules"
)

// Scheduler behaviour on two emulated paths. The model is a fluid one at
// 1 ms steps, with the link parameters of emu's LEO scenario: each path has
// a FIFO send queue, a fixed congestion window, a bottleneck rate and a
// round-trip time; a packet leaves the queue when the window and the rate
// allow and is acknowledged one RTT (plus its serialisation) later. After
// every step the model publishes its state to the path's policy.Path the
// way the tunnel's tracer does (OnMetrics, SetQueueLen). Everything in
// policy takes the time as an argument, so the model runs on simulated
// time and gives the same result every run.

// simPath is one modelled path.
type simPath struct {
	p        *Path
	rtt      time.Duration
	rate     float64 // bytes per second
	cwnd     int     // bytes
	queue    []int   // packet sizes, bytes
	queued   int     // bytes
	flight   []simInFlight
	inflight int // bytes
	credit   float64
	sent     int // bytes handed to the path
}

type simInFlight struct {
	n   int
	ack time.Time
}

func newSimPath(name string, labels map[string]string, rtt time.Duration, rate emu.BitRate, cwnd int, now time.Time) *simPath {
	s := &simPath{p: NewPath(name, labels, 1<<16), rtt: rtt, rate: float64(rate) / 8, cwnd: cwnd}
	s.p.SetConnected(true, now)
	s.publish(now)
	return s
}

func (s *simPath) push(n int) {
	s.queue = append(s.queue, n)
	s.queued += n
	s.sent += n
	s.p.SetQueueLen(len(s.queue), s.queued)
}

// step advances the path by dt to now: acknowledgements, then
// transmissions within the window and the rate.
func (s *simPath) step(now time.Time, dt time.Duration) {
	k := 0
	for _, f := range s.flight {
		if f.ack.After(now) {
			s.flight[k] = f
			k++
		} else {
			s.inflight -= f.n
		}
	}
	s.flight = s.flight[:k]
	s.credit += s.rate * dt.Seconds()
	for len(s.queue) > 0 && s.inflight+s.queue[0] <= s.cwnd && s.credit >= float64(s.queue[0]) {
		n := s.queue[0]
		s.queue, s.queued = s.queue[1:], s.queued-n
		s.credit -= float64(n)
		s.inflight += n
		s.flight = append(s.flight, simInFlight{n, now.Add(s.rtt + time.Duration(float64(n)/s.rate*1e9))})
	}
	if len(s.queue) == 0 {
		s.credit = min(s.credit, 1500) // an idle link saves up no more than a packet
	}
	s.publish(now)
}

func (s *simPath) publish(now time.Time) {
	s.p.OnMetrics(s.rtt, s.rtt, s.cwnd, s.inflight)
	s.p.SetQueueLen(len(s.queue), s.queued)
	s.p.OnReceive(now)
}

// The S2 video of docs/evaluation.md ("S2, LEO plus terrestrial"): 50 fps, a 1-s GOP, an
// I-frame of about 230 KB, P-frames of 15, 10 and 8 KB (temporal layers 0,
// 1 and 2), cut into packets of simPacket bytes.
const (
	simFPS    = 50
	simIFrame = 230_000
	simPacket = 1200
)

var simPFrames = [...]int{15_000, 8_000, 10_000, 8_000} // layers 0, 2, 1, 2

func simFrameSize(n int) int {
	if n%simFPS == 0 {
		return simIFrame
	}
	return simPFrames[n%len(simPFrames)]
}

// S2's paths (emu.LEOScenario): a satellite path with 45 ms one-way delay
// and a metered terrestrial one with emu.MeteredDelay (15 ms) one way at
// emu.MeteredRate; windows sized as MoMQ §5.2 reports (82 KB on the
// terrestrial path).
const (
	simSatRTT      = 90 * time.Millisecond
	simSatRate     = 100 * emu.Mbps
	simSatCwnd     = 600_000
	simMeteredCwnd = 82_000
)

func simMeteredRTT() time.Duration { return 2 * emu.MeteredDelay }

// runVideo sends the S2 video for frames frames through pick (which
// returns the path index for each packet) and returns the bytes each path
// carried.
func runVideo(start time.Time, frames int, paths []*simPath, pick func(now time.Time, frame, n int) int) []int {
	const dt = time.Millisecond
	frameEvery := time.Second / simFPS
	for t := time.Duration(0); t < time.Duration(frames)*frameEvery; t += dt {
		now := start.Add(t)
		if t%frameEvery == 0 {
			f := int(t / frameEvery)
			for left := simFrameSize(f); left > 0; left -= simPacket {
				n := min(left, simPacket)
				paths[pick(now, f, n)].push(n)
			}
		}
		for _, s := range paths {
			s.step(now, dt)
		}
	}
	out := make([]int, len(paths))
	for i, s := range paths {
		out[i] = s.sent
	}
	return out
}

// TestSimMinRTT: minRTT puts most traffic on the faster path (Paasch et al.
// 2014), and, when an I-frame overflows the fast path's window, spills the
// overflow onto the slow path (MoMQ §5.2: "the overflow packets spill onto
// Starlink").
func TestSimMinRTT(t *testing.T) {
	start := time.Date(2025, 3, 5, 12, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		sched Picker
	}{{"minrtt", MinRTT{}}, {"blest", BLEST{}}} {
		fast := newSimPath("ter", nil, simMeteredRTT(), emu.MeteredRate, simMeteredCwnd, start)
		slow := newSimPath("sat", nil, simSatRTT, simSatRate, simSatCwnd, start)
		paths := []*simPath{slow, fast}
		states := []*Path{slow.p, fast.p}
		out := make([]int, 2)
		sent := runVideo(start, 250, paths, func(now time.Time, _, _ int) int {
			if tc.sched.Pick(states, now, out) != 1 {
				t.Fatalf("%s: no pick", tc.name)
			}
			return out[0]
		})
		share := float64(sent[1]) / float64(sent[0]+sent[1])
		t.Logf("%s: fast path share %.1f %% of %d bytes", tc.name, 100*share, sent[0]+sent[1])
		switch tc.name {
		case "minrtt":
			// Most traffic on the fast path, but the I-frames' overflow
			// (230 KB against an 82 KB window) goes to the slow path.
			if share < 0.6 || share > 0.95 {
				t.Errorf("minrtt: fast path share %.2f, want most but not all", share)
			}
		case "blest":
			// BLEST predicts that the fast path's backlog (≤ 230 KB) drains
			// within one slow RTT (82 KB × 90/30 = 246 KB of sending), so
			// waiting beats the slow path: nothing spills (MoMQ §5.2: "BLEST
			// avoids Starlink whenever it estimates blocking would occur").
			if share < 0.99 {
				t.Errorf("blest: fast path share %.3f, want all but a trace", share)
			}
		}
	}
}

// TestSimBLESTSpills: when the fast path's backlog would take longer to
// drain than the slow path's RTT, BLEST does use the slow path.
func TestSimBLESTSpills(t *testing.T) {
	start := time.Date(2025, 3, 5, 12, 0, 30, 0, time.UTC)
	// A slow path only 1.2× the fast one's RTT: X = 82 KB × 1.2 < 230 KB.
	fast := newSimPath("ter", nil, simMeteredRTT(), emu.MeteredRate, simMeteredCwnd, start)
	slow := newSimPath("sat", nil, simMeteredRTT()*6/5, simSatRate, simSatCwnd, start)
	states := []*Path{slow.p, fast.p}
	out := make([]int, 2)
	sent := runVideo(start, 100, []*simPath{slow, fast}, func(now time.Time, _, _ int) int {
		BLEST{}.Pick(states, now, out)
		return out[0]
	})
	if share := float64(sent[0]) / float64(sent[0]+sent[1]); share < 0.05 {
		t.Errorf("blest: slow path share %.3f with a deep fast-path backlog, want some spill", share)
	}
}

// TestSimMoMQRules runs the four rules of MoMQ Table 1
// (docs/examples/rules/momq-svc.yaml) over the S2 paths for one minute
// from a UTC minute boundary, through the same steps as the tunnel's send
// path: annotate, evaluate, Select, track. It checks R4 (bulk traffic stays
// on the free satellite path), R2 (an I-frame that starts inside a danger
// zone, seconds 12/27/42/57 ± 100 ms, goes on the metered path, all of its
// packets, R3), and R1 (P-frames during an I-frame get the priority, within
// the slack).
func TestSimMoMQRules(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "docs", "examples", "rules", "momq-svc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.CompileBytes("momq-svc.yaml", src, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cls, err := classify.New(classify.Options{RTPPorts: []classify.PortRange{{Lo: 5004, Hi: 5004}},
		PayloadTypes: map[uint8]classify.Codec{96: classify.CodecH264}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)
	sat := newSimPath("sat", map[string]string{"cost_class": "free", "link_type": "satellite"}, simSatRTT, simSatRate, simSatCwnd, start)
	sat.p.SetLEOReconf(&LEOReconf{})
	ter := newSimPath("ter", map[string]string{"cost_class": "metered"}, simMeteredRTT(), emu.MeteredRate, simMeteredCwnd, start)
	paths := []*simPath{sat, ter}
	states := []*Path{sat.p, ter.p}

	var (
		md    classify.Metadata
		ann   rules.Annotations
		dir   rules.Directive
		sc    Scratch
		out   = make([]int, 2)
		pkt   = make([]byte, 0, 1500)
		seq   uint16
		onTer = map[int]int{}  // frame → packets on the metered path
		total = map[int]int{}  // frame → packets
		r1    int              // P-frame packets that got R1's priority
		zone  = map[int]bool{} // I-frames that start in a danger zone
	)
	sent := runVideo(start, 60*simFPS, paths, func(now time.Time, f, n int) int {
		key := f%simFPS == 0
		if key && sat.p.InLEOReconf(now) {
			zone[f] = true
		}
		seq++
		pkt = simRTP(pkt[:0], key, seq, uint32(f*90000/simFPS), n)
		cls.Parse(pkt, &md)
		ann = rules.Annotations{PendingIFrame: PendingIFrame(states, now, n), LEOState: LEOState(states, now)}
		set.Evaluate(&md, &ann, &dir)
		obj := Object{Key: classify.KeyFrameID, ID: md.FrameID()}
		if k := Select(LowestRTT{}, &dir, obj, states, now, out, &sc); k != 1 {
			t.Fatalf("frame %d: %d paths", f, k)
		}
		if key {
			states[out[0]].OnIFramePacket(md.FrameID(), n, now)
		} else if states[out[0]].AdmitPFrame(n, now) && dir.Priority == 255 {
			r1++
		}
		total[f]++
		if out[0] == 1 {
			onTer[f]++
		}
		return out[0]
	})
	if len(zone) != 4 {
		t.Fatalf("%d I-frames in danger zones, want 4 (seconds 12, 27, 42, 57)", len(zone))
	}
	for f, n := range total {
		switch {
		case zone[f] && onTer[f] != n:
			t.Errorf("I-frame %d (second %d, danger zone): %d of %d packets on the metered path, want all (R2, R3)", f, f/simFPS, onTer[f], n)
		case !zone[f] && onTer[f] != 0:
			t.Errorf("frame %d (second %d): %d of %d packets on the metered path, want none (R4)", f, f/simFPS, onTer[f], n)
		}
	}
	share := float64(sent[1]) / float64(sent[0]+sent[1])
	t.Logf("metered share %.2f %% (MoMQ §5.2: 11.3 %% with SVC layers and live paths); %d P-frame packets interleaved by R1", 100*share, r1)
	if share > 0.05 {
		t.Errorf("metered path share %.3f, want only the danger-zone I-frames", share)
	}
	if r1 == 0 {
		t.Error("no P-frame packet got R1's priority while an I-frame was in flight")
	}
}

// simRTP builds an IPv4/UDP/RTP packet of n bytes carrying one H.264 NAL
// unit: an IDR slice (type 5) for a keyframe, else a non-IDR slice (type 1).
func simRTP(b []byte, key bool, seq uint16, ts uint32, n int) []byte {
	const ipUDP = 28
	n = max(n, ipUDP+13)
	b = append(b, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2)
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b = binary.BigEndian.AppendUint16(b, 40000)
	b = binary.BigEndian.AppendUint16(b, 5004)
	b = binary.BigEndian.AppendUint16(b, uint16(n-20))
	b = append(b, 0, 0)
	b = append(b, 0x80, 96)
	b = binary.BigEndian.AppendUint16(b, seq)
	b = binary.BigEndian.AppendUint32(b, ts)
	b = binary.BigEndian.AppendUint32(b, 0x6a5cc848)
	nal := byte(0x41)
	if key {
		nal = 0x65
	}
	b = append(b, nal)
	for len(b) < n {
		b = append(b, 0x88)
	}
	// IPv4 header checksum.
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	return b
}
