package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/tunnel"
)

// Legacy video: what a broadcast encoder sends, end to end. A pre-encoded
// H.264 file is streamed by ffmpeg with -c copy (no re-encoding, as a
// hardware encoder would) from the edge's namespace through the bond, as
// RTP (RFC 6184) or as MPEG-TS directly over UDP, six 188-byte TS packets
// per datagram (docs/video.md, MTU). The concentrator side records what
// arrives, in arrival order, and the recording is decoded and compared,
// frame by frame (MD5 of each decoded frame, ffmpeg -f framemd5), with a
// decode of the source.
//
//   - MPEG-TS over UDP: the datagrams are written to a .ts file in the
//     order they came, as a TS receiver without a reorder buffer reads
//     them; continuity errors are counted per PID from the TS headers
//     (ISO/IEC 13818-1 §2.4.3.3, continuity_counter).
//   - RTP: the packets are put in sequence-number order first (an ideal
//     jitter buffer: RTP receivers reorder, RFC 3550 §5.1), sequence
//     numbers never seen are counted as missed, and the H.264 payload
//     (single NAL units, STAP-A, FU-A; RFC 6184 §5.6–5.8) is written as an
//     Annex B stream; an FU-A NAL unit missing a fragment is left out.

// Video formats.
const (
	FormatRTP = "rtp"
	FormatTS  = "ts"
)

// VideoResult is one run's outcome, in frames unless named otherwise.
type VideoResult struct {
	Name             string `json:"name"`
	Format           string `json:"format"`            // FormatRTP or FormatTS
	Frames           int    `json:"frames"`            // frames in the source
	BitExact         int    `json:"bit_exact"`         // decoded frames identical to a frame of the source's decode
	Decodable        int    `json:"decodable"`         // frames the decoder output from the recording
	ContinuityErrors int    `json:"continuity_errors"` // TS: continuity-counter breaks, all PIDs
	RTPMissed        int    `json:"rtp_missed"`        // RTP: sequence numbers that never arrived
	Datagrams        int    `json:"datagrams"`         // received
	// Where the datagrams that did not arrive went, from the bond's
	// counters over the run (both directions of the bed's bond).
	Counters VideoCounters `json:"counters"`
}

// VideoCounters are the bond's counters over one run, in packets: the
// sender's FEC and queue drops and the receiver's FEC and resequencer.
type VideoCounters struct {
	DataSent     uint64            `json:"data_sent"`       // sender: data packets FEC protected
	ParitySent   uint64            `json:"parity_sent"`     // sender: FEC parity datagrams queued
	FECRecovered uint64            `json:"fec_recovered"`   // receiver: data packets FEC rebuilt
	FECLost      uint64            `json:"fec_lost"`        // receiver: data packets missing when their block timed out
	ReseqHeld    uint64            `json:"reseq_held"`      // receiver: held behind a gap
	ReseqSkipped uint64            `json:"reseq_skipped"`   // receiver: gaps given up (the stream's lost datagrams)
	ReseqLate    uint64            `json:"reseq_late"`      // receiver: came after their gap was given up
	Drops        map[string]uint64 `json:"drops,omitempty"` // sender's and receiver's drops by reason, bond and paths, nonzero only
}

// videoCounters returns the counters of after minus before: edge is the
// sender's bond, conc the receiver's.
func videoCounters(edge0, edge1, conc0, conc1 tunnel.BondStats) VideoCounters {
	c := VideoCounters{Drops: map[string]uint64{}}
	if edge0.FEC != nil && edge1.FEC != nil {
		c.DataSent = edge1.FEC.DataProtected - edge0.FEC.DataProtected
		c.ParitySent = edge1.FEC.ParitySent - edge0.FEC.ParitySent
	}
	if conc0.FEC != nil && conc1.FEC != nil {
		c.FECRecovered = conc1.FEC.Recovered - conc0.FEC.Recovered
		c.FECLost = conc1.FEC.Lost - conc0.FEC.Lost
	}
	if conc0.Reseq != nil && conc1.Reseq != nil {
		c.ReseqHeld = conc1.Reseq.Held - conc0.Reseq.Held
		c.ReseqSkipped = conc1.Reseq.Skipped - conc0.Reseq.Skipped
		c.ReseqLate = conc1.Reseq.Late - conc0.Reseq.Late
	}
	add := func(d0, d1 tunnel.DropCounts) {
		for r, n := range d1 {
			if v := n - d0[r]; v > 0 && r != tunnel.DropDuplicate {
				c.Drops[r.String()] += v
			}
		}
	}
	for _, s := range [][2]tunnel.BondStats{{edge0, edge1}, {conc0, conc1}} {
		add(s[0].Drops, s[1].Drops)
		for i := range s[1].Paths {
			if i < len(s[0].Paths) {
				add(s[0].Paths[i].Drops, s[1].Paths[i].Drops)
			}
		}
	}
	return c
}

// VideoSource is a test video file and the MD5 of each frame of its decode.
type VideoSource struct {
	Path string
	MD5  []string
}

// legacyFPS, legacyGOP: the test video's frame rate and keyframe interval.
const (
	legacyFPS = 25
	legacyGOP = 50
)

// MakeVideoSource encodes seconds of ffmpeg's test pattern (640×360, 25
// fps, GOP 50, no B-frames, 2 Mbit/s, SPS and PPS before every keyframe
// so that a stream joined at a keyframe decodes) into dir/source.mp4 and
// decodes it for the reference MD5s. Errors: ffmpeg missing or failing.
func MakeVideoSource(ctx context.Context, dir string, seconds int) (*VideoSource, error) {
	src := filepath.Join(dir, "source.mp4")
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc=size=640x360:rate=%d", legacyFPS), "-t", strconv.Itoa(seconds),
		"-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "veryfast", "-b:v", "2M", "-maxrate", "2.5M", "-bufsize", "1M",
		"-g", strconv.Itoa(legacyGOP), "-bf", "0", "-x264-params", "repeat-headers=1", src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("encoding the test video: %v\n%s", err, out)
	}
	md5, err := frameMD5s(ctx, src, "")
	if err != nil {
		return nil, err
	}
	return &VideoSource{Path: src, MD5: md5}, nil
}

// frameMD5s decodes the video of path (demuxer format: "" to probe) and
// returns the MD5 of each decoded frame, in output order. A damaged input
// decodes as far as it can; a file with no decodable frame gives none.
func frameMD5s(ctx context.Context, path, format string) ([]string, error) {
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "quiet"}
	if format != "" {
		args = append(args, "-f", format)
	}
	args = append(args, "-i", path, "-map", "0:v:0", "-f", "framemd5", "-")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ffmpeg", args...)
	cmd.Stdout = &out
	err := cmd.Run()
	var md5 []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Split(line, ","); len(f) >= 6 {
			md5 = append(md5, strings.TrimSpace(f[len(f)-1]))
		}
	}
	if err != nil && len(md5) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return md5, nil
}

// StreamVideo streams src through bed (a netns testbed: bed.EdgeNS set) in
// format, records what reaches demo.ConcAddr:demo.Port until drain after
// the sender ends, and scores the recording against src. dir receives the recording.
// Errors: no namespace, the sender failing, ctx ending.
func StreamVideo(ctx context.Context, bed *demo.Bed, src *VideoSource, format, name, dir string, drain time.Duration) (VideoResult, error) {
	res := VideoResult{Name: name, Format: format, Frames: len(src.MD5)}
	if bed.EdgeNS == "" {
		return res, errors.New("legacy video needs the netns testbed (root)")
	}
	var url string
	dst := netip.AddrPortFrom(demo.ConcAddr, demo.Port)
	switch format {
	case FormatRTP:
		url = fmt.Sprintf("rtp://%s?pkt_size=1200", dst)
	case FormatTS:
		url = fmt.Sprintf("udp://%s?pkt_size=1128", dst) // 6 × 188
	default:
		return res, fmt.Errorf("format %q is not rtp or ts", format)
	}
	var (
		mu    sync.Mutex
		grams [][]byte
	)
	edge0, conc0 := bed.Edge.Stats(), bed.Conc.Stats()
	rctx, stop := context.WithCancel(ctx)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		bed.Recv(rctx, func(p []byte, _ time.Time) {
			mu.Lock()
			grams = append(grams, slices.Clone(p))
			mu.Unlock()
		})
	}()
	// -re: at the frame rate, as a live encoder sends.
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", bed.EdgeNS, "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error",
		"-re", "-i", src.Path, "-map", "0:v:0", "-c", "copy", "-f", map[string]string{FormatRTP: "rtp", FormatTS: "mpegts"}[format], url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		stop()
		<-recvDone
		return res, fmt.Errorf("sender: %v\n%s", err, out)
	}
	select {
	case <-time.After(drain):
	case <-ctx.Done():
	}
	stop()
	<-recvDone
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Counters = videoCounters(edge0, bed.Edge.Stats(), conc0, bed.Conc.Stats())
	res.Datagrams = len(grams)
	var rec []byte
	var recFormat string
	switch format {
	case FormatTS:
		for _, g := range grams {
			rec = append(rec, g...)
		}
		res.ContinuityErrors = tsContinuityErrors(rec)
		recFormat = "mpegts"
	case FormatRTP:
		rec, res.RTPMissed = depacketizeH264(grams)
		recFormat = "h264"
	}
	path := filepath.Join(dir, name+"."+format)
	if err := os.WriteFile(path, rec, 0o644); err != nil {
		return res, err
	}
	got, err := frameMD5s(ctx, path, recFormat)
	if err != nil {
		return res, err
	}
	res.Decodable = len(got)
	res.BitExact = matchFrames(src.MD5, got)
	return res, nil
}

// matchFrames counts the frames of got whose MD5 is that of a frame of ref
// (a multiset intersection: a lost frame does not shift the others out of
// step, and every frame of the test pattern differs from the others).
func matchFrames(ref, got []string) int {
	left := map[string]int{}
	for _, m := range ref {
		left[m]++
	}
	n := 0
	for _, m := range got {
		if left[m] > 0 {
			left[m]--
			n++
		}
	}
	return n
}

// tsContinuityErrors counts the TS packets of ts (188-byte packets in a
// row) whose continuity_counter is not the one after their PID's previous
// packet with payload (ISO/IEC 13818-1 §2.4.3.3): a packet without
// payload keeps the counter, a repeated packet (same counter, once) is
// allowed, and PID 0x1FFF (null packets) is not counted.
func tsContinuityErrors(ts []byte) int {
	last := map[uint16]int{}
	errs := 0
	for off := 0; off+188 <= len(ts); off += 188 {
		p := ts[off : off+188]
		if p[0] != 0x47 {
			errs++
			continue
		}
		pid := binary.BigEndian.Uint16(p[1:]) & 0x1fff
		if pid == 0x1fff || p[3]&0x10 == 0 {
			continue
		}
		cc := int(p[3] & 0x0f)
		if prev, ok := last[pid]; ok && cc != (prev+1)&0x0f && cc != prev {
			errs++
		}
		last[pid] = cc
	}
	return errs
}

// depacketizeH264 puts the RTP packets in grams in sequence-number order
// (duplicates dropped), counts the sequence numbers missing between the
// first and the last, and returns the H.264 Annex B stream of their
// payloads (RFC 6184: single NAL unit packets, STAP-A, FU-A; an FU-A NAL
// unit with a missing fragment is left out).
func depacketizeH264(grams [][]byte) (annexB []byte, missed int) {
	type pkt struct {
		seq     int64
		payload []byte
	}
	var pkts []pkt
	var hi int64 = -1
	for _, g := range grams {
		if len(g) < 12 || g[0]>>6 != 2 || g[1]&0x7f < 96 {
			continue
		}
		cc := int(g[0] & 0x0f)
		hl := 12 + 4*cc
		if g[0]&0x10 != 0 && len(g) >= hl+4 { // header extension
			hl += 4 + 4*int(binary.BigEndian.Uint16(g[hl+2:]))
		}
		if len(g) <= hl {
			continue
		}
		s := int64(binary.BigEndian.Uint16(g[2:]))
		if hi >= 0 { // unwrap against the highest so far
			for s < hi-32768 {
				s += 65536
			}
		}
		hi = max(hi, s)
		pkts = append(pkts, pkt{s, g[hl:]})
	}
	slices.SortStableFunc(pkts, func(a, b pkt) int { return int(a.seq - b.seq) })
	pkts = slices.CompactFunc(pkts, func(a, b pkt) bool { return a.seq == b.seq })
	if len(pkts) == 0 {
		return nil, 0
	}
	missed = int(pkts[len(pkts)-1].seq-pkts[0].seq+1) - len(pkts)
	start := []byte{0, 0, 0, 1}
	var fu []byte // the FU-A NAL unit being reassembled; nil: none
	var fuNext int64
	for _, p := range pkts {
		b := p.payload
		switch t := b[0] & 0x1f; {
		case t >= 1 && t <= 23:
			fu = nil
			annexB = append(append(annexB, start...), b...)
		case t == 24: // STAP-A
			fu = nil
			for r := b[1:]; len(r) >= 2; {
				n := int(binary.BigEndian.Uint16(r))
				if n == 0 || len(r) < 2+n {
					break
				}
				annexB = append(append(annexB, start...), r[2:2+n]...)
				r = r[2+n:]
			}
		case t == 28 && len(b) >= 2: // FU-A
			switch {
			case b[1]&0x80 != 0: // start
				fu = append([]byte{b[0]&0xe0 | b[1]&0x1f}, b[2:]...)
			case fu != nil && p.seq == fuNext:
				fu = append(fu, b[2:]...)
			default:
				fu = nil // a fragment is missing
				continue
			}
			fuNext = p.seq + 1
			if b[1]&0x40 != 0 { // end
				annexB = append(append(annexB, start...), fu...)
				fu = nil
			}
		}
	}
	return annexB, missed
}

// LossScenario is the three-path scenario of the legacy video targets:
// 1.5 % random loss each way on every path, one-way delays of 20, 30 and
// 40 ms, 20 Mbit/s.
func LossScenario() emu.Scenario {
	sc := emu.Scenario{Name: "loss", Source: "builtin"}
	for i, d := range []time.Duration{20, 30, 40} {
		l := emu.LinkConfig{Delay: d * time.Millisecond, Rate: 20 * emu.Mbps, Loss: 0.015}
		sc.Paths = append(sc.Paths, emu.PathModel{Name: fmt.Sprintf("loss%d", i), Labels: map[string]string{"link_type": "cellular"}, Up: l, Down: l})
	}
	return sc
}
