package config

import (
	"net/netip"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/classify"
)

func (d *configDecoder) classify(n *yaml.Node, c *ClassifyConfig) {
	c.src = d.src
	f := d.fields(n, "classify", classifyKeys)
	if f == nil {
		return
	}
	c.RTPPorts = d.portRanges(f["rtp_ports"], "classify.rtp_ports")
	if pt := f["payload_types"]; pt != nil {
		c.PayloadTypes = d.payloadTypes(pt, "classify.payload_types")
	}
	c.SDP = d.str(f["sdp"], "classify.sdp", "the path of an SDP file")
	if h := f["rtp_heuristic"]; h != nil {
		if on, ok := d.boolean(h, "classify.rtp_heuristic"); ok {
			c.NoRTPHeuristic = !on
		}
	}
	if d.notList(f["classes"], "classify.classes", "classes", "{name: video, match: {ports: [5004-5010]}}") {
		return
	}
	for i, it := range d.list(f["classes"], "classify.classes", "classes") {
		c.Classes = append(c.Classes, d.class(it, indexField("classify.classes", i)))
	}
}

func (d *configDecoder) class(n *yaml.Node, path string) classify.Class {
	var cl classify.Class
	f := d.fields(n, path, classKeys)
	if f == nil {
		return cl
	}
	cl.Name = d.str(f["name"], path+".name", "a class name")
	if m := f["match"]; m != nil {
		mf := d.fields(m, path+".match", classMatchKeys)
		if mf != nil {
			cl.Match = d.classMatch(mf, path+".match")
		}
	}
	if l := f["labels"]; l != nil {
		cl.Labels, _ = d.labelPairs(l, path+".labels", "{media: camera}")
	}
	return cl
}

func (d *configDecoder) classMatch(f map[string]*yaml.Node, path string) classify.ClassMatch {
	var m classify.ClassMatch
	const protoWant = "a protocol name (udp, tcp, icmp, icmpv6, sctp, …) or number from 0 to 255"
	if n := f["proto"]; !d.notList(n, path+".proto", "protocols", "udp") {
		for i, it := range d.list(n, path+".proto", "protocols") {
			fi := indexField(path+".proto", i)
			s, ok := d.scalar(it, fi, protoWant)
			if !ok {
				m.Protos = append(m.Protos, 0)
				continue
			}
			p, err := classify.KeyProto.ParseValue(s)
			if err != nil {
				d.errorf(it, fi, "expected %s, got %q", protoWant, s)
			}
			m.Protos = append(m.Protos, uint8(p))
		}
	}
	for _, side := range []struct {
		key string
		dst *[]netip.Prefix
	}{{"src", &m.Src}, {"dst", &m.Dst}} {
		field := path + "." + side.key
		if n := f[side.key]; !d.notList(n, field, "network prefixes", "10.77.17.0/24") {
			*side.dst = d.prefixes(n, field, "a network prefix", "10.77.17.0/24 or fd77:0:0:17::/64")
		}
	}
	m.SrcPorts = d.portRanges(f["src_ports"], path+".src_ports")
	m.DstPorts = d.portRanges(f["dst_ports"], path+".dst_ports")
	m.Ports = d.portRanges(f["ports"], path+".ports")
	if n := f["dscp"]; !d.notList(n, path+".dscp", "DSCP code points", "EF") {
		for i, it := range d.list(n, path+".dscp", "DSCP code points") {
			fi := indexField(path+".dscp", i)
			s, ok := d.scalar(it, fi, dscpWant)
			if !ok {
				m.DSCP = append(m.DSCP, 0)
				continue
			}
			v, ok := parseDSCP(s)
			if !ok {
				d.errorf(it, fi, "expected %s, got %q", dscpWant, s)
			}
			m.DSCP = append(m.DSCP, v)
		}
	}
	return m
}

// notList reports, after recording an error, that n is a single value
// where a list is expected, and shows the list to write instead.
func (d *configDecoder) notList(n *yaml.Node, field, wantItems, example string) bool {
	if n == nil || n.Kind != yaml.ScalarNode || isNullNode(n) {
		return false
	}
	d.errorf(n, field, "expected a list of %s, like [%s], got %q", wantItems, example, n.Value)
	return true
}

const portRangeWant = "a port or a range LO-HI of ports from 0 to 65535, like 5004 or 5004-5010"

// portRanges decodes a list of ports and LO-HI ranges. An item that does
// not parse stays the zero PortRange, so that indexes match the file.
func (d *configDecoder) portRanges(n *yaml.Node, field string) []classify.PortRange {
	if d.notList(n, field, "ports or ranges", "5004-5010") {
		return nil
	}
	items := d.list(n, field, "ports or ranges")
	if items == nil {
		return nil
	}
	out := make([]classify.PortRange, len(items))
	for i, it := range items {
		f := indexField(field, i)
		s, ok := d.scalar(it, f, portRangeWant)
		if !ok {
			continue
		}
		r, ok := parsePortRange(s)
		if !ok {
			d.errorf(it, f, "expected %s, got %q", portRangeWant, s)
			continue
		}
		out[i] = r
	}
	return out
}

// parsePortRange parses PORT or LO-HI (spaces around the dash allowed); it
// does not check LO ≤ HI.
func parsePortRange(s string) (classify.PortRange, bool) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	if err != nil {
		return classify.PortRange{}, false
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 16); err != nil {
			return classify.PortRange{}, false
		}
	}
	return classify.PortRange{Lo: uint16(a), Hi: uint16(b)}, true
}

const payloadTypeWant = "an RTP payload type from 0 to 127"

// payloadTypes decodes a mapping of payload types to codec names.
func (d *configDecoder) payloadTypes(n *yaml.Node, path string) map[uint8]classify.Codec {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of RTP payload types to codecs, like {96: h264, 111: opus}, got %s", describeNode(n))
		return nil
	}
	m := make(map[uint8]classify.Codec, len(n.Content)/2)
	first := make(map[int]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := derefNode(n.Content[i]), derefNode(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected %s as the key, got %s", payloadTypeWant, describeNode(k))
			continue
		}
		f := joinField(path, k.Value)
		d.src.lines[f] = k.Line
		pt, err := strconv.Atoi(k.Value)
		if err != nil || pt < 0 || pt > 255 {
			d.errorf(k, f, "expected %s as the key, got %q", payloadTypeWant, k.Value)
			continue
		}
		if line, dup := first[pt]; dup {
			d.errorf(k, f, "payload type %d set twice; first set at line %d", pt, line)
			continue
		}
		first[pt] = k.Line
		want := "a codec name (" + strings.Join(codecNames(), ", ") + ") or auto"
		s, ok := d.scalar(val, f, want)
		if !ok {
			continue
		}
		codec, known := classify.CodecByName(s)
		switch {
		case strings.EqualFold(s, "auto"):
			codec = classify.CodecUnknown
		case !known:
			d.errorf(val, f, "expected %s to learn it from the payload, got %q", want, s)
			continue
		}
		m[uint8(pt)] = codec
	}
	return m
}

// codecNames returns the names of the codecs classify knows.
func codecNames() []string {
	var names []string
	for c := classify.CodecUnknown + 1; c.String() != ""; c++ {
		names = append(names, c.String())
	}
	return names
}

func (d *configDecoder) boolean(n *yaml.Node, field string) (bool, bool) {
	s, ok := d.scalar(n, field, "true or false")
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	d.errorf(n, field, "expected true or false, got %q", s)
	return false, false
}

const dscpWant = "a DSCP from 0 to 63 or a name like EF, AF41, CS6 or LE"

// dscpNames are the DSCP names of RFC 2474 (CS), RFC 2597 (AF), RFC 3246
// (EF), RFC 5865 (VA) and RFC 8622 (LE); DF is the default (CS0).
var dscpNames = map[string]uint8{
	"df": 0, "be": 0, "le": 1, "va": 44, "ef": 46,
	"cs0": 0, "cs1": 8, "cs2": 16, "cs3": 24, "cs4": 32, "cs5": 40, "cs6": 48, "cs7": 56,
	"af11": 10, "af12": 12, "af13": 14, "af21": 18, "af22": 20, "af23": 22,
	"af31": 26, "af32": 28, "af33": 30, "af41": 34, "af42": 36, "af43": 38,
}

// parseDSCP parses a DSCP name (any case) or a decimal number 0–63.
func parseDSCP(s string) (uint8, bool) {
	if v, ok := dscpNames[strings.ToLower(s)]; ok {
		return v, true
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil || v > 63 {
		return 0, false
	}
	return uint8(v), true
}
