// Package inspect does the work of bondd's offline tools, which read a
// capture (pcap or pcapng) or a rule file and print what bondd would do:
// bondd classify (Classify) and bondd rules check and explain (RulesCheck,
// RulesExplain).
package inspect

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/classify/capture"
)

// ClassifyOptions builds classifier options from bondd classify's flags:
// ports are UDP ports or LO-HI ranges carrying RTP, pts are PT=CODEC
// pairs as in SDP a=rtpmap (96=h264). An unparsable value is an error
// naming the flag.
func ClassifyOptions(ports, pts []string, noHeuristic bool) (classify.Options, error) {
	opts := classify.Options{NoHeuristic: noHeuristic}
	for _, s := range ports {
		lo, hi, isRange := strings.Cut(s, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 16)
		}
		if err != nil || a > b {
			return opts, fmt.Errorf("classify: --rtp-ports %q: want PORT or LO-HI", s)
		}
		opts.RTPPorts = append(opts.RTPPorts, classify.PortRange{Lo: uint16(a), Hi: uint16(b)})
	}
	for _, s := range pts {
		pt, name, ok := strings.Cut(s, "=")
		n, err := strconv.ParseUint(pt, 10, 7)
		codec, known := classify.CodecByName(name)
		if !ok || err != nil || !known {
			return opts, fmt.Errorf("classify: --rtp-pt %q: want PT=CODEC with PT 0-127 and a known codec", s)
		}
		if opts.PayloadTypes == nil {
			opts.PayloadTypes = map[uint8]classify.Codec{}
		}
		opts.PayloadTypes[uint8(n)] = codec
	}
	return opts, nil
}

// Classify runs the classifier over every IP packet of the capture at path
// and writes, to w, one line (or JSON object) per packet, or per flow with
// summary. Errors are the capture's read errors and w's write errors.
func Classify(w io.Writer, path string, opts classify.Options, summary, asJSON bool) error {
	r, err := capture.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := classify.New(opts)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	keys := outputKeys(opts.Classes)
	var (
		md    classify.Metadata
		fr    capture.Frame
		line  []byte
		flows = map[flowKey]*flowStats{}
		order []*flowStats
	)
	for {
		err := r.Next(&fr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if fr.IP == nil {
			continue
		}
		reason := c.Parse(fr.IP, &md)
		if summary {
			fs := flows[newFlowKey(&md)]
			if fs == nil {
				fs = &flowStats{key: newFlowKey(&md), first: fr.Index, pt: -1, frames: map[uint64]classify.FrameType{}}
				flows[fs.key] = fs
				order = append(order, fs)
			}
			fs.add(&md)
			continue
		}
		line = appendPacket(line[:0], fr.Index, &md, keys, reason, asJSON)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	if summary {
		return writeSummary(bw, order, asJSON)
	}
	return nil
}

// outputKey is a key printed per packet, with its name.
type outputKey struct {
	key  classify.Key
	name string
}

// outputKeys returns the builtin keys in their documented order, then the
// label keys of classes in order of first use.
func outputKeys(classes *classify.ClassSet) []outputKey {
	var ks []outputKey
	for _, k := range classify.BuiltinKeys() {
		ks = append(ks, outputKey{k, k.String()})
	}
	if classes != nil {
		for _, k := range classes.LabelKeys() {
			ks = append(ks, outputKey{k, classes.KeyName(k)})
		}
	}
	return ks
}

// appendPacket formats one packet: "index key=value …" or a JSON object.
func appendPacket(b []byte, index int, md *classify.Metadata, keys []outputKey, reason classify.Reason, asJSON bool) []byte {
	if asJSON {
		b = append(b, `{"index":`...)
	}
	b = strconv.AppendInt(b, int64(index), 10)
	for _, o := range keys {
		k := o.key
		if !md.Has(k) {
			continue
		}
		if asJSON {
			b = append(b, ',')
			b = strconv.AppendQuote(b, o.name)
			b = append(b, ':')
			b = appendJSONValue(b, md, k)
		} else {
			b = append(b, ' ')
			b = append(b, o.name...)
			b = append(b, '=')
			b, _ = md.AppendValue(b, k)
		}
	}
	if reason != classify.ReasonNone {
		if asJSON {
			b = append(b, `,"reason":`...)
			b = strconv.AppendQuote(b, reason.String())
		} else {
			b = append(b, " reason="...)
			b = append(b, reason.String()...)
		}
	}
	if asJSON {
		b = append(b, '}')
	}
	return append(b, '\n')
}

// appendJSONValue writes numbers and rtp_marker bare, everything else as a
// JSON string; the text is AppendValue's in both cases.
func appendJSONValue(b []byte, md *classify.Metadata, k classify.Key) []byte {
	if k.IsNumeric() || k == classify.KeyRTPMarker {
		b, _ = md.AppendValue(b, k)
		return b
	}
	v, _ := md.AppendValue(nil, k)
	s, _ := json.Marshal(string(v))
	return append(b, s...)
}

// flowKey groups packets into flows for --summary: protocol, addresses and
// ports, and for RTP the SSRC.
type flowKey struct {
	proto    uint8
	src, dst string
	sport    uint16
	dport    uint16
	ssrc     uint32
	rtp      bool
}

func newFlowKey(md *classify.Metadata) flowKey {
	return flowKey{
		proto: md.Proto, src: md.Src.String(), dst: md.Dst.String(),
		sport: md.SrcPort, dport: md.DstPort,
		ssrc: md.RTP.SSRC, rtp: md.Has(classify.KeyRTPSSRC),
	}
}

type flowStats struct {
	key       flowKey
	first     int
	packets   int
	bytes     int
	keyPkts   int
	dscp      [64]int
	codec     classify.Codec
	pt        int
	class     string
	frames    map[uint64]classify.FrameType // frame_id → type
	protoName string
}

func (fs *flowStats) add(md *classify.Metadata) {
	fs.packets++
	fs.bytes += int(md.Length)
	fs.dscp[md.DSCP]++
	if fs.protoName == "" {
		v, _ := md.AppendValue(nil, classify.KeyProto)
		fs.protoName = string(v)
	}
	if md.Has(classify.KeyCodec) {
		fs.codec = md.Codec
	}
	if md.Has(classify.KeyRTPPayloadType) {
		fs.pt = int(md.RTP.PayloadType)
	}
	if md.Has(classify.KeyClass) {
		fs.class = md.Class()
	}
	if md.FrameType == classify.FrameKey {
		fs.keyPkts++
	}
	if md.Has(classify.KeyFrameID) {
		if ft := fs.frames[md.FrameID()]; ft != classify.FrameKey {
			fs.frames[md.FrameID()] = md.FrameType
		}
	}
}

func (fs *flowStats) keyframes() int {
	n := 0
	for _, ft := range fs.frames {
		if ft == classify.FrameKey {
			n++
		}
	}
	return n
}

func (fs *flowStats) dscpList() string {
	var parts []string
	for d, n := range fs.dscp {
		if n > 0 {
			parts = append(parts, strconv.Itoa(d))
		}
	}
	return strings.Join(parts, ",")
}

type flowJSON struct {
	First      int     `json:"first_index"`
	Proto      string  `json:"proto"`
	Src        string  `json:"src_ip"`
	SrcPort    uint16  `json:"src_port,omitempty"`
	Dst        string  `json:"dst_ip"`
	DstPort    uint16  `json:"dst_port,omitempty"`
	SSRC       *uint32 `json:"rtp_ssrc,omitempty"`
	PT         *int    `json:"rtp_pt,omitempty"`
	Codec      string  `json:"codec,omitempty"`
	Class      string  `json:"class,omitempty"`
	DSCP       []int   `json:"dscp"`
	Packets    int     `json:"packets"`
	Bytes      int     `json:"bytes"`
	Frames     int     `json:"frames,omitempty"`
	Keyframes  int     `json:"keyframes,omitempty"`
	KeyPackets int     `json:"keyframe_packets,omitempty"`
	Note       string  `json:"note,omitempty"`
}

// unrecognised is the codec shown for an RTP flow on a dynamic payload
// type whose codec could not be told from its payloads.
const unrecognised = "unrecognised"

// codecName is the flow's codec as --summary shows it ("" when none).
func (fs *flowStats) codecName() string {
	if fs.unrecognised() {
		return unrecognised
	}
	return fs.codec.String()
}

// unrecognised: RTP on a dynamic payload type (96–127, or the unassigned
// 35–63 that classify also learns from the payload) with no codec found.
func (fs *flowStats) unrecognised() bool {
	return fs.key.rtp && fs.codec == classify.CodecUnknown && (fs.pt >= 96 || fs.pt >= 35 && fs.pt <= 63)
}

// note says how to name the codec of an unrecognised flow.
func (fs *flowStats) note() string {
	if !fs.unrecognised() {
		return ""
	}
	return fmt.Sprintf("RTP on dynamic payload type %d, codec unrecognised (no payload matched H.264, H.265, VP8, VP9, AV1 or MPEG-TS; SRTP payloads are encrypted): name it with --rtp-pt %d=CODEC or --sdp FILE (the sender's SDP), or classify.payload_types / classify.sdp in the config", fs.pt, fs.pt)
}

func writeSummary(w io.Writer, flows []*flowStats, asJSON bool) error {
	sort.SliceStable(flows, func(i, j int) bool { return flows[i].first < flows[j].first })
	if asJSON {
		enc := json.NewEncoder(w)
		for _, fs := range flows {
			fj := flowJSON{
				First: fs.first, Proto: fs.protoName, Src: fs.key.src, Dst: fs.key.dst,
				SrcPort: fs.key.sport, DstPort: fs.key.dport, Codec: fs.codecName(), Class: fs.class, Note: fs.note(),
				Packets: fs.packets, Bytes: fs.bytes, Frames: len(fs.frames),
				Keyframes: fs.keyframes(), KeyPackets: fs.keyPkts, DSCP: []int{},
			}
			if fs.key.rtp {
				ssrc, pt := fs.key.ssrc, fs.pt
				fj.SSRC, fj.PT = &ssrc, &pt
			}
			for d, n := range fs.dscp {
				if n > 0 {
					fj.DSCP = append(fj.DSCP, d)
				}
			}
			if err := enc.Encode(fj); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIRST\tPROTO\tSOURCE\tDESTINATION\tSSRC\tPT\tCODEC\tCLASS\tDSCP\tPACKETS\tBYTES\tFRAMES\tKEYFRAMES\tKEY_PACKETS")
	for _, fs := range flows {
		ssrc, pt := "-", "-"
		if fs.key.rtp {
			ssrc, pt = fmt.Sprintf("0x%08x", fs.key.ssrc), strconv.Itoa(fs.pt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n",
			fs.first, fs.protoName, hostPort(fs.key.src, fs.key.sport), hostPort(fs.key.dst, fs.key.dport),
			ssrc, pt, orDash(fs.codecName()), orDash(fs.class), fs.dscpList(),
			fs.packets, fs.bytes, len(fs.frames), fs.keyframes(), fs.keyPkts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, fs := range flows {
		if n := fs.note(); n != "" {
			if _, err := fmt.Fprintf(w, "note: flow %d (SSRC 0x%08x): %s\n", fs.first, fs.key.ssrc, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func hostPort(addr string, port uint16) string {
	if port == 0 {
		return addr
	}
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + strconv.Itoa(int(port))
	}
	return addr + ":" + strconv.Itoa(int(port))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
