package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bondd/bondd/classify"
)

// The classify section's checks and its compilation into classify.Options.

// classLabelKeyRE is what classify.NewClassSet accepts as a label key.
var classLabelKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

func (c *ClassifyConfig) validate(v *configValidator) {
	c.compile(v)
}

// compile checks c, reporting every problem to v with the field at fault,
// and then compiles its classes; the set is nil when there are none or
// when a problem was found.
func (c *ClassifyConfig) compile(v *configValidator) *classify.ClassSet {
	before := len(v.errs)
	checkPortRanges(v, "classify.rtp_ports", c.RTPPorts)
	if n := len(c.RTPPorts); n > classify.MaxRTPPortRanges {
		v.errorf(indexField("classify.rtp_ports", classify.MaxRTPPortRanges), "at most %d port ranges are allowed, got %d", classify.MaxRTPPortRanges, n)
	}
	for _, pt := range slices.Sorted(maps.Keys(c.PayloadTypes)) {
		f := joinField("classify.payload_types", strconv.Itoa(int(pt)))
		switch codec := c.PayloadTypes[pt]; {
		case pt > 127:
			v.errorf(f, "expected %s as the key, got %d", payloadTypeWant, pt)
		case pt >= 72 && pt <= 76:
			v.errorf(f, "payload type %d cannot be told from RTCP (packet types 200-204 with the marker bit, RFC 3550 §12.1, RFC 5761 §4); expected 0 to 71 or 77 to 127", pt)
		case codec != classify.CodecUnknown && codec.String() == "":
			v.errorf(f, "unknown codec %d; expected one of %s, or auto", codec, strings.Join(codecNames(), ", "))
		}
	}

	if _, err := c.sdpPayloadTypes(); err != nil {
		v.errorf("classify.sdp", "%v", err)
	}
	if n := len(c.Classes); n > classify.MaxClasses {
		v.errorf(indexField("classify.classes", classify.MaxClasses), "at most %d classes are allowed, got %d", classify.MaxClasses, n)
	}
	names := make(map[string]int)
	labelKeys := make(map[string]bool) // distinct label keys of all classes
	for i := range c.Classes {
		cl := &c.Classes[i]
		path := indexField("classify.classes", i)
		switch {
		case cl.Name == "":
			v.missing(path+".name", path, "required; expected the name rules see as class, like video")
		case len(cl.Name) > classify.MaxLabelValueBytes:
			v.errorf(path+".name", "expected a class name of at most %d bytes, got %d bytes", classify.MaxLabelValueBytes, len(cl.Name))
		default:
			if j, dup := names[cl.Name]; dup {
				v.errorf(path+".name", "class name %q is already used by %s", cl.Name, v.where(indexField("classify.classes", j)))
			} else {
				names[cl.Name] = i
			}
		}

		mp := path + ".match"
		m := &cl.Match
		checkPrefixList(v, mp+".src", m.Src, "10.77.17.0/24")
		checkPrefixList(v, mp+".dst", m.Dst, "10.78.0.0/16")
		if n := len(m.Src) + len(m.Dst); n > classify.MaxPrefixesPerClass {
			v.errorf(mp, "at most %d prefixes (src and dst together) are allowed in one class, got %d", classify.MaxPrefixesPerClass, n)
		}
		checkPortRanges(v, mp+".src_ports", m.SrcPorts)
		checkPortRanges(v, mp+".dst_ports", m.DstPorts)
		checkPortRanges(v, mp+".ports", m.Ports)
		if n := len(m.SrcPorts) + len(m.DstPorts) + len(m.Ports); n > classify.MaxPortRangesPerClass {
			v.errorf(mp, "at most %d port ranges (src_ports, dst_ports and ports together) are allowed in one class, got %d", classify.MaxPortRangesPerClass, n)
		}
		checkDistinct(v, mp+".proto", m.Protos, nil)
		checkDistinct(v, mp+".dscp", m.DSCP, func(d uint8) string {
			if d > 63 {
				return fmt.Sprintf("expected %s, got %d", dscpWant, d)
			}
			return ""
		})

		lp := path + ".labels"
		if n := len(cl.Labels); n > classify.MaxLabelsPerClass {
			v.errorf(lp, "at most %d labels are allowed in one class, got %d", classify.MaxLabelsPerClass, n)
		}
		seen := make(map[string]bool)
		for _, l := range cl.Labels {
			f := joinField(lp, l.Key)
			_, builtin := classify.KeyByName(l.Key)
			switch {
			case l.Key == "":
				v.errorf(lp, "expected non-empty label keys, got an empty key")
			case len(l.Key) > classify.MaxKeyBytes:
				v.errorf(f, "expected a label key of at most %d bytes, got %d bytes", classify.MaxKeyBytes, len(l.Key))
			case !classLabelKeyRE.MatchString(l.Key):
				v.errorf(f, "expected a label key of a-z 0-9 _ . - starting with a lower-case letter, like media, got %q", l.Key)
			case l.Key == "class":
				v.errorf(f, "class is set by the class name; choose another label key")
			case builtin:
				v.errorf(f, "%s is a metadata key the classifier sets; choose another label key", l.Key)
			case seen[l.Key]:
				v.errorf(f, "label %q set twice", l.Key)
			case l.Value == "":
				v.errorf(f, "expected a non-empty label value, like %s: camera", l.Key)
			case len(l.Value) > classify.MaxLabelValueBytes:
				v.errorf(f, "expected a label value of at most %d bytes, got %d bytes", classify.MaxLabelValueBytes, len(l.Value))
			case !labelKeys[l.Key]:
				labelKeys[l.Key] = true
				if len(labelKeys) > classify.MaxLabelKeys {
					v.errorf(f, "%q is distinct label key %d of all classes; at most %d are allowed", l.Key, len(labelKeys), classify.MaxLabelKeys)
				}
			}
			seen[l.Key] = true
		}
	}

	if len(v.errs) > before || (v.src != nil && (v.src.badAround("classify") || v.src.badInside("classify"))) || len(c.Classes) == 0 {
		return nil
	}
	// Every bound above is classify's; this catches any check it adds.
	set, err := classify.NewClassSet(c.Classes)
	if err != nil {
		e := classSetError(err)
		v.add(e.Field, e.Field, "%s", []any{e.Msg})
		return nil
	}
	return set
}

// classSetError turns an error of classify.NewClassSet into an Error on
// the field at fault (a *classify.FieldError), or on classify.classes.
func classSetError(err error) *Error {
	var fe *classify.FieldError
	if errors.As(err, &fe) {
		return &Error{Field: joinField("classify", fe.Field), Msg: fe.Err.Error()}
	}
	return &Error{Field: "classify.classes", Msg: strings.TrimPrefix(err.Error(), "classify: ")}
}

// Options returns the classifier options c describes, with its classes
// compiled into a ClassSet. It runs the checks Validate runs on the section,
// so a ClassifyConfig built in Go gets the same messages; a ClassifyConfig
// from Load or Parse has passed them, and its errors carry the
// file and line. The error, if any, is Errors. A nil c gives the zero
// Options (heuristic RTP detection, no classes).
func (c *ClassifyConfig) Options() (classify.Options, error) {
	if c == nil {
		return classify.Options{}, nil
	}
	v := &configValidator{src: c.src}
	set := c.compile(v)
	if len(v.errs) > 0 {
		v.errs.sort()
		return classify.Options{}, v.errs
	}
	pts, _ := c.sdpPayloadTypes()
	for pt, codec := range c.PayloadTypes {
		pts[pt] = codec // payload_types override the SDP file
	}
	return classify.Options{
		RTPPorts:     slices.Clone(c.RTPPorts),
		PayloadTypes: pts,
		NoHeuristic:  c.NoRTPHeuristic,
		Classes:      set,
	}, nil
}

// sdpPayloadTypes reads the SDP file's payload types (an empty map when
// there is none); the error is a *classify.SDPError.
func (c *ClassifyConfig) sdpPayloadTypes() (map[uint8]classify.Codec, error) {
	if c.SDP == "" {
		return map[uint8]classify.Codec{}, nil
	}
	return classify.LoadSDP(c.SDP)
}

// checkPortRanges checks that each range of a list has Lo ≤ Hi and
// overlaps no earlier one.
func checkPortRanges(v *configValidator, field string, rs []classify.PortRange) {
	for i, r := range rs {
		f := indexField(field, i)
		if r.Lo > r.Hi {
			v.errorf(f, "expected a range LO-HI with LO at most HI, like %d-%d, got %d-%d", r.Hi, r.Lo, r.Lo, r.Hi)
			continue
		}
		for j, o := range rs[:i] {
			if o.Lo <= o.Hi && r.Lo <= o.Hi && o.Lo <= r.Hi {
				v.errorf(f, "%s overlaps %s at %s", formatPortRange(r), formatPortRange(o), v.where(indexField(field, j)))
				break
			}
		}
	}
}

func formatPortRange(r classify.PortRange) string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}
