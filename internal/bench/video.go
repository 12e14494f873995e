package bench

// The S2 load: SVC video as RTP H.264 (RFC 3550, RFC 6184, RFC 6190), with
// the frame sizes and GOP structure of paper 2 (MoMQ), §5.1 and Table 4:
// 50 fps, one I-frame per 1-s GOP (≈ 230 KB), and P-frames of three
// temporal layers, 15/10/8 KB, 12/12/25 per GOP.
//
// Each frame is one access unit sent as a burst at its capture time
// (frame i at start + i·20 ms), as a live encoder does, in two slices:
//
//   - the first packet is a STAP-A (RFC 6184 §5.7.1) holding, for an
//     I-frame, SPS and PPS, then the SVC prefix NAL unit (type 14; RFC 6190
//     §1.1.3), whose SVC extension carries temporal_id (the classifier's
//     temporal_layer), and the frame's first slice, filling the packet;
//   - the rest of the frame is a second slice NAL unit in FU-A fragments
//     (RFC 6184 §5.8), or in one single-NAL-unit packet when it fits.
//
// Slices are IDR (type 5) in an I-frame and non-IDR (type 1) in a P-frame,
// so every packet, the STAP-A included, tells the classifier the frame
// type. The last packet has the RTP marker bit. Every packet is a 1200-byte
// IPv4 packet or smaller, like S1's. The classifier, configured with
// payload type 96 = H.264 (what an SDP a=rtpmap line would say), then sees
// frame_type, frame_id and temporal_layer on every packet of the frame.
// Simplification: one prefix NAL unit per access unit, not one per slice.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/bondd/bondd/internal/demo"
)

// Video parameters (paper 2 §5.1 and Table 4).
const (
	videoFPS        = 50    // frames per second
	videoGOPFrames  = 50    // frames per GOP: a 1-s GOP at 50 fps
	videoClockRate  = 90000 // RTP clock of video, Hz (RFC 6184 §8.2.1)
	videoTSPerFrame = videoClockRate / videoFPS
	videoIBytes     = 230_000 // I-frame slice, bytes
	videoPT         = 96      // dynamic RTP payload type mapped to H.264
	videoSSRC       = 0x5b0dd5ec
	videoTSBase     = 0x10000000 // RTP timestamp of frame 0
	videoSeqBase    = 0xff00     // RTP sequence number of the first packet (wraps early, on purpose)
	videoRTPHeader  = 12         // bytes, no CSRC, no extension
	// videoMaxRTPPayload is the RTP payload of a full packet, bytes: a
	// 1200-byte IPv4 packet minus IPv4, UDP and RTP headers.
	videoMaxRTPPayload = demo.PacketBytes - 28 - videoRTPHeader
	// videoFrameInterval is the time between two frames' capture.
	videoFrameInterval = time.Second / videoFPS
)

// videoPBytes are the P-frame slice sizes of temporal layers 0, 1 and 2,
// bytes (paper 2 Table 4).
var videoPBytes = [3]int{15_000, 10_000, 8_000}

// Frame kinds, for the per-type statistics.
const (
	frameI = iota // IDR
	frameP        // non-IDR
)

// videoFrame is one frame of the schedule.
type videoFrame struct {
	kind     uint8  // frameI or frameP
	layer    uint8  // temporal layer, 0 = base
	bytes    int    // slice NAL units, bytes (headers included)
	packets  int    // RTP packets, the announcing packet included
	firstPkt int    // index of the first packet among all packets of the run
	firstSeq uint16 // RTP sequence number of the first packet
}

// videoLayer returns the frame kind and temporal layer of frame i of a
// GOP: a dyadic three-layer structure, I (layer 0) at 0, layer 0 at
// multiples of 4, layer 1 at 2 mod 4, layer 2 at odd positions; over 49
// P-frames that is 12/12/25 per GOP, paper 2's Table 4.
func videoLayer(i int) (kind, layer uint8) {
	switch i %= videoGOPFrames; {
	case i == 0:
		return frameI, 0
	case i%4 == 0:
		return frameP, 0
	case i%2 == 0:
		return frameP, 1
	default:
		return frameP, 2
	}
}

// slicePackets is the number of packets a slice of n bytes takes: none
// for n = 0, one single-NAL-unit packet when it fits, else FU-A fragments
// of up to videoMaxRTPPayload − 2 bytes of the NAL unit after its header
// byte.
func slicePackets(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= videoMaxRTPPayload:
		return 1
	}
	per := videoMaxRTPPayload - 2
	return (n - 1 + per - 1) / per
}

// prefixNALBytes is the length of the prefix NAL unit (appendPrefixNAL).
const prefixNALBytes = 5

// firstSlice returns the bytes of a frame's first slice, the one in the
// STAP-A: what fills the packet after the STAP-A header, the parameter
// sets (I-frames) and the prefix NAL unit, each unit with its 2-byte size;
// never leaving a second slice shorter than 2 bytes (header and one byte).
func firstSlice(kind uint8, bytes int) int {
	room := videoMaxRTPPayload - 1 - (2 + prefixNALBytes) - 2
	if kind == frameI {
		room -= 2 + len(videoSPS) + 2 + len(videoPPS)
	}
	switch {
	case bytes <= room:
		return bytes
	case bytes-room < 2:
		return bytes - 2
	}
	return room
}

// videoSchedule returns the frames of a run of duration.
func videoSchedule(duration time.Duration) []videoFrame {
	n := int(duration / videoFrameInterval)
	frames := make([]videoFrame, n)
	pkt := 0
	for i := range frames {
		kind, layer := videoLayer(i)
		size := videoIBytes
		if kind == frameP {
			size = videoPBytes[layer]
		}
		frames[i] = videoFrame{kind: kind, layer: layer, bytes: size, packets: 1 + slicePackets(size-firstSlice(kind, size)),
			firstPkt: pkt, firstSeq: uint16(videoSeqBase + pkt)}
		pkt += frames[i].packets
	}
	return frames
}

// Parameter sets sent in front of every IDR: plausible H.264 High-profile
// SPS and PPS NAL units (their content is not decoded by anyone here).
var (
	videoSPS = []byte{0x67, 0x64, 0x00, 0x28, 0xac, 0xd9, 0x40, 0x78, 0x02, 0x27, 0xe5, 0x84, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x03, 0x00, 0xc8, 0x3c, 0x60, 0xc6, 0x58}
	videoPPS = []byte{0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0}
)

// appendPrefixNAL appends an SVC prefix NAL unit (H.264 G.7.3.1.1 and
// G.7.3.2.12; RFC 6190 §1.1.3) for a frame of the given kind and temporal
// layer: NAL header (NRI 3, type 14), the 3-byte SVC extension
// (svc_extension_flag 1, idr_flag, no_inter_layer_pred_flag 1,
// dependency_id 0, quality_id 0, temporal_id, output_flag 1), and a
// one-byte prefix_nal_unit_svc payload (flags 0, RBSP stop bit).
func appendPrefixNAL(b []byte, kind, layer uint8) []byte {
	idr := byte(0)
	if kind == frameI {
		idr = 0x40
	}
	return append(b, 0x60|14, 0x80|idr, 0x80, layer<<5|0x07, 0x20) // prefixNALBytes long
}

// videoPacketiser builds the RTP packets of frames into one reused buffer.
type videoPacketiser struct {
	buf    []byte
	filler []byte // slice payload bytes, videoMaxRTPPayload long
}

// newVideoPacketiser returns a packetiser with its buffer and filler
// payload allocated.
func newVideoPacketiser() *videoPacketiser {
	f := make([]byte, videoMaxRTPPayload)
	x := uint32(2463534242)
	for i := range f { // xorshift: payload bytes that look like entropy-coded data
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		f[i] = byte(x)
	}
	return &videoPacketiser{buf: make([]byte, 0, videoRTPHeader+videoMaxRTPPayload), filler: f}
}

// rtpHeader starts p.buf with the RTP header of packet j of frame i.
func (p *videoPacketiser) rtpHeader(i int, f *videoFrame, j int) {
	m := byte(0)
	if j == f.packets-1 {
		m = 0x80
	}
	b := append(p.buf[:0], 0x80, m|videoPT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(b[2:], f.firstSeq+uint16(j))
	binary.BigEndian.PutUint32(b[4:], uint32(videoTSBase+i*videoTSPerFrame))
	binary.BigEndian.PutUint32(b[8:], videoSSRC)
	p.buf = b
}

// frame calls emit with each RTP packet of frame i, in order. The packet
// is valid only during the call. It returns emit's first error.
func (p *videoPacketiser) frame(i int, f *videoFrame, emit func([]byte) error) error {
	nri, typ := byte(0x40), byte(1)
	switch {
	case f.kind == frameI:
		nri, typ = 0x60, 5
	case f.layer == 2:
		nri = 0 // the top layer is not a reference: discardable
	}
	// The STAP-A: parameter sets, prefix NAL unit, first slice.
	p.rtpHeader(i, f, 0)
	p.buf = append(p.buf, 0x60|24) // STAP-A with NRI 3, the highest of its units (RFC 6184 §5.7.1)
	if f.kind == frameI {
		for _, nal := range [][]byte{videoSPS, videoPPS} {
			p.buf = binary.BigEndian.AppendUint16(p.buf, uint16(len(nal)))
			p.buf = append(p.buf, nal...)
		}
	}
	p.buf = binary.BigEndian.AppendUint16(p.buf, prefixNALBytes)
	p.buf = appendPrefixNAL(p.buf, f.kind, f.layer)
	s1 := firstSlice(f.kind, f.bytes)
	p.buf = binary.BigEndian.AppendUint16(p.buf, uint16(s1))
	p.buf = append(p.buf, nri|typ)
	p.buf = append(p.buf, p.filler[:s1-1]...)
	if err := emit(p.buf); err != nil {
		return err
	}
	// The second slice.
	rest := f.bytes - s1
	switch {
	case rest == 0:
		return nil
	case f.packets == 2: // single NAL unit packet
		p.rtpHeader(i, f, 1)
		p.buf = append(p.buf, nri|typ)
		p.buf = append(p.buf, p.filler[:rest-1]...)
		return emit(p.buf)
	}
	rest-- // bytes after the NAL header
	per := videoMaxRTPPayload - 2
	for j := 1; j < f.packets; j++ {
		p.rtpHeader(i, f, j)
		fh := typ
		if j == 1 {
			fh |= 0x80 // S
		}
		if j == f.packets-1 {
			fh |= 0x40 // E
		}
		n := min(per, rest)
		p.buf = append(p.buf, nri|28, fh)
		p.buf = append(p.buf, p.filler[:n]...)
		rest -= n
		if err := emit(p.buf); err != nil {
			return err
		}
	}
	if rest != 0 {
		return fmt.Errorf("video: frame %d: %d slice bytes left after %d packets", i, rest, f.packets)
	}
	return nil
}

// videoFlow sends the schedule and records what arrives. send runs on one
// goroutine and deliver on another; read the results after both returned.
// All state is allocated up front: neither side allocates per packet.
type videoFlow struct {
	frames []videoFrame
	pk     *videoPacketiser
	start  time.Time

	sentAt     []int64 // sender's: Unix ns when frame i's first packet was sent; 0: not sent
	sendErrors int     // sender's: packets the host refused to send (their frames are lost)

	got    []bool  // receiver's, by packet index of the run
	count  []int32 // receiver's, packets of frame i received
	doneAt []int64 // receiver's, Unix ns when frame i's last missing packet arrived; 0: incomplete
}

// newVideoFlow returns the flow of a run of duration, with the schedule
// and all receive state allocated.
func newVideoFlow(duration time.Duration) *videoFlow {
	frames := videoSchedule(duration)
	total := 0
	if n := len(frames); n > 0 {
		total = frames[n-1].firstPkt + frames[n-1].packets
	}
	return &videoFlow{frames: frames, pk: newVideoPacketiser(), sentAt: make([]int64, len(frames)),
		got: make([]bool, total), count: make([]int32, len(frames)), doneAt: make([]int64, len(frames))}
}

// send sends frame i at start + i·20 ms, each frame's packets back to back.
func (v *videoFlow) send(ctx context.Context, bed *demo.Bed, start time.Time) error {
	v.start = start
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	timer.Stop()
	emit := v.emit(bed.Send)
	for i := range v.frames {
		if err := sleepUntil(ctx, start.Add(time.Duration(i)*videoFrameInterval), timer); err != nil {
			return err
		}
		v.sentAt[i] = time.Now().UnixNano()
		if err := v.pk.frame(i, &v.frames[i], emit); err != nil {
			return err
		}
	}
	return nil
}

// emit returns send as the packetiser's emit: a packet the host refuses
// (EMSGSIZE after an ICMP "fragmentation needed" from the tunnel lowered
// the path MTU, ENOBUFS, an ICMP error on the connected socket) is
// counted in sendErrors and its frame is lost, as it would be for a
// legacy sender; only a closed socket ends the run.
func (v *videoFlow) emit(send func([]byte) error) func([]byte) error {
	return func(p []byte) error {
		err := send(p)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			v.sendErrors++
			return nil
		}
		return err
	}
}

// deliver records one received RTP packet: the frame by its RTP timestamp,
// the packet by its sequence number relative to the frame's first.
func (v *videoFlow) deliver(p []byte, now time.Time) {
	if len(p) < videoRTPHeader || p[0]>>6 != 2 || binary.BigEndian.Uint32(p[8:]) != videoSSRC {
		return
	}
	d := binary.BigEndian.Uint32(p[4:]) - videoTSBase
	if d%videoTSPerFrame != 0 || int(d/videoTSPerFrame) >= len(v.frames) {
		return
	}
	i := int(d / videoTSPerFrame)
	f := &v.frames[i]
	j := int(binary.BigEndian.Uint16(p[2:]) - f.firstSeq)
	if j >= f.packets || v.got[f.firstPkt+j] {
		return
	}
	v.got[f.firstPkt+j] = true
	v.count[i]++
	if int(v.count[i]) == f.packets {
		v.doneAt[i] = now.UnixNano()
	}
}

// videoStats are the per-frame results of a run.
type videoStats struct {
	fctAll, fctI, fctP []float64 // frame completion times of complete frames, ms, sorted
	frames, lost       int       // frames sent, frames incomplete at the end
	sendErrors         int       // packets the host refused to send
	bufferMs           float64   // median over windows of the minimum playback buffer, ms
	bufferMaxMs        float64   // the largest window's
	bufferWholeMs      float64   // over the whole run as one window
	windows            int
	windowBufs         []float64 // minimum playback buffer of each window, ms, sorted
}

// videoBufferWindow is the span over which one minimum playback buffer is
// computed: 10 s, as paper 2's 100 buffer values from 10 runs of a 100-s
// video (§5.1) imply.
const videoBufferWindow = 10 * time.Second

// stats computes the frame completion times and playback buffers.
//
// Frame completion time (FCT) of frame i = the arrival of the packet that
// completes it − the send time of its first packet (paper 2 §5.1 measures
// to the last packet's acknowledgment; bondd's datagrams have none, so the
// arrival is the receiver-side equivalent). Frames still incomplete after
// the drain time are lost: they have no FCT and count in lost.
//
// Minimum playback buffer of a window of frames = max_i D_i − min_i D_i
// over the window's complete frames, with D_i = arrival of the last packet
// of frame i − (start + i·20 ms), the frame's delivery deviation from its
// capture schedule. A player that starts playing min_i D_i + B after the
// capture of frame 0 and then plays one frame per 20 ms finds every
// complete frame of the window in time iff B ≥ max D − min D: this is paper
// 2's "minimum-maximum buffer" of the live evaluation (§5.1, A.6.2). Lost
// frames are skipped (concealed), not waited for.
func (v *videoFlow) stats() videoStats {
	s := videoStats{frames: len(v.frames), sendErrors: v.sendErrors}
	perWindow := int(videoBufferWindow / videoFrameInterval)
	var bufs []float64
	lo, hi, inWin := 0.0, 0.0, 0
	wlo, whi, seen := 0.0, 0.0, false
	for i := range v.frames {
		if v.doneAt[i] == 0 || v.sentAt[i] == 0 {
			s.lost++
		} else {
			fct := float64(v.doneAt[i]-v.sentAt[i]) / 1e6
			s.fctAll = append(s.fctAll, fct)
			if v.frames[i].kind == frameI {
				s.fctI = append(s.fctI, fct)
			} else {
				s.fctP = append(s.fctP, fct)
			}
			d := float64(v.doneAt[i]-v.start.Add(time.Duration(i)*videoFrameInterval).UnixNano()) / 1e6
			if inWin == 0 {
				lo, hi = d, d
			}
			lo, hi, inWin = min(lo, d), max(hi, d), inWin+1
			if !seen {
				wlo, whi, seen = d, d, true
			}
			wlo, whi = min(wlo, d), max(whi, d)
		}
		if (i+1)%perWindow == 0 {
			if inWin > 0 {
				bufs = append(bufs, hi-lo)
			}
			inWin = 0
		}
	}
	if len(bufs) == 0 && inWin > 0 { // a run shorter than one window
		bufs = append(bufs, hi-lo)
	}
	for _, a := range [][]float64{s.fctAll, s.fctI, s.fctP, bufs} {
		slices.Sort(a)
	}
	s.windows = len(bufs)
	s.windowBufs = bufs
	if len(bufs) > 0 {
		s.bufferMs = median(bufs)
		s.bufferMaxMs = bufs[len(bufs)-1]
	}
	if seen {
		s.bufferWholeMs = whi - wlo
	}
	return s
}

// median returns the median of sorted (the mean of the middle two for an
// even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
