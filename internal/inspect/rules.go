package inspect

// bondd rules check FILE and bondd rules explain --rules FILE --pcap
// CAPTURE: validate a rule file, and show what it does to real traffic.
// The rule language is documented in docs/rules.md.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/classify/capture"
	"github.com/bondd/bondd/rules"
)

// loadRules compiles a rule file, printing warnings, or prints its errors
// and returns a short error.
func loadRules(stderr io.Writer, path string) (*rules.Set, error) {
	s, err := rules.Load(path, rules.Options{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		n := 1
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			n = len(j.Unwrap())
		}
		return nil, fmt.Errorf("rules: %s rejected (%d %s)", path, n, plural(n, "error", "errors"))
	}
	for _, w := range s.Warnings() {
		fmt.Fprintf(stderr, "%s:%d: warning: %s\n", w.File, w.Line, w.Msg)
	}
	return s, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// RulesCheck compiles the rule file at path as the daemon would and writes
// its rules in evaluation order to stdout, warnings and errors to stderr.
// A rejected file is an error counting its problems.
func RulesCheck(stdout, stderr io.Writer, path string) error {
	s, err := loadRules(stderr, path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d %s, in evaluation order\n", path, s.Len(), plural(s.Len(), "rule", "rules"))
	if s.Len() == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tID\tPRIORITY\tLINE\tMATCH\tACTIONS")
	for i := 0; i < s.Len(); i++ {
		r := s.Rule(i)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\n", i+1, r.ID, r.Priority, r.Line, r.MatchText(), r.ActionText())
	}
	return tw.Flush()
}

// ExplainOptions are the settings of RulesExplain (the flags of bondd
// rules explain).
type ExplainOptions struct {
	RulesPath, PcapPath string
	Labels              []string // PATH=KEY=VALUE[,KEY=VALUE…]
	Annotate            []string // pending_iframe=true, leo_state=reconf
	RTPPorts, RTPPTs    []string // as ClassifyOptions takes them
	NoHeuristic         bool
}

// explainPath is a path named on the command line, with its labels.
type explainPath struct {
	name   string
	labels map[string]string
	order  []string // label keys in the order given
}

func parseExplainPaths(specs []string) ([]*explainPath, error) {
	var paths []*explainPath
	byName := map[string]*explainPath{}
	for _, spec := range specs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" || rest == "" {
			return nil, fmt.Errorf("rules explain: --labels %q: want PATH=KEY=VALUE[,KEY=VALUE...]", spec)
		}
		p := byName[name]
		if p == nil {
			p = &explainPath{name: name, labels: map[string]string{}}
			byName[name] = p
			paths = append(paths, p)
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return nil, fmt.Errorf("rules explain: --labels %q: label %q is not KEY=VALUE", spec, kv)
			}
			if _, dup := p.labels[k]; !dup {
				p.order = append(p.order, k)
			}
			p.labels[k] = v
		}
	}
	return paths, nil
}

func parseAnnotations(specs []string) (rules.Annotations, error) {
	var a rules.Annotations
	for _, s := range specs {
		if v, ok := strings.CutPrefix(s, rules.KeyBudgetUsed+"="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 10 {
				return a, fmt.Errorf("rules explain: --annotate %q: want budget_used=SHARE, a share of the budget like 0.85", s)
			}
			a.BudgetUsed, a.HasBudget = uint64(math.Round(1000*f)), true
			continue
		}
		switch s {
		case rules.KeyPendingIFrame + "=true":
			a.PendingIFrame = true
		case rules.KeyLEOState + "=" + rules.LEOReconf.String():
			a.LEOState = rules.LEOReconf
		default:
			return a, fmt.Errorf("rules explain: --annotate %q: want pending_iframe=true, leo_state=reconf or budget_used=SHARE", s)
		}
	}
	return a, nil
}

// explainFlow is one flow of the capture: protocol, addresses and ports,
// and the RTP SSRC for RTP.
type explainFlow struct {
	proto    uint8
	src, dst netip.Addr
	sport    uint16
	dport    uint16
	ssrc     uint32
	rtp      bool
}

// explainGroup is the packets of one flow that share a class and an
// outcome.
type explainGroup struct {
	class     string // frame_type and traffic class, or "-"
	rules     rules.RuleMask
	directive string
	paths     string
	packets   int
	first     int
}

type explainFlowStats struct {
	key     explainFlow
	first   int
	packets int
	label   string // proto, codec
	groups  map[string]*explainGroup
}

// RulesExplain classifies every IP packet of o.PcapPath, evaluates the
// rule file o.RulesPath on it and writes, per flow, one line per group of
// packets that got the same directive (and the paths it resolves to with
// o.Labels). Errors: a bad flag value, a rejected rule file, an
// unreadable capture.
func RulesExplain(stdout, stderr io.Writer, o ExplainOptions) error {
	paths, err := parseExplainPaths(o.Labels)
	if err != nil {
		return err
	}
	ann, err := parseAnnotations(o.Annotate)
	if err != nil {
		return err
	}
	copts, err := ClassifyOptions(o.RTPPorts, o.RTPPTs, o.NoHeuristic)
	if err != nil {
		return err
	}
	set, err := loadRules(stderr, o.RulesPath)
	if err != nil {
		return err
	}
	c, err := classify.New(copts)
	if err != nil {
		return err
	}
	var (
		md      classify.Metadata
		d       rules.Directive
		total   int
		flows   = map[explainFlow]*explainFlowStats{}
		order   []*explainFlowStats
		perRule = make([]int, set.Len())
		noRule  int
	)
	err = eachIPPacket(o.PcapPath, func(fr *capture.Frame) error {
		c.Parse(fr.IP, &md)
		set.Evaluate(&md, &ann, &d)
		total++
		key := explainFlow{proto: md.Proto, src: md.Src, dst: md.Dst, sport: md.SrcPort, dport: md.DstPort,
			ssrc: md.RTP.SSRC, rtp: md.Has(classify.KeyRTPSSRC)}
		fs := flows[key]
		if fs == nil {
			fs = &explainFlowStats{key: key, first: fr.Index, groups: map[string]*explainGroup{}}
			flows[key] = fs
			order = append(order, fs)
		}
		fs.packets++
		if fs.label == "" || md.Has(classify.KeyCodec) {
			fs.label = flowLabel(&md)
		}
		class := packetClass(&md)
		dir := d.String() // without the affinity's object id, so frames group together
		gk := class + "\x00" + dir + "\x00" + fmt.Sprint(d.Rules)
		g := fs.groups[gk]
		if g == nil {
			g = &explainGroup{class: class, rules: d.Rules, directive: dir, paths: resolvePaths(&d, paths), first: fr.Index}
			fs.groups[gk] = g
		}
		g.packets++
		if d.Rules.Count() == 0 {
			noRule++
		}
		for i := range perRule {
			if d.Rules.Has(i) {
				perRule[i]++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	w := bufio.NewWriter(stdout)
	defer w.Flush()
	fmt.Fprintf(w, "rules: %s (%d %s)\n", o.RulesPath, set.Len(), plural(set.Len(), "rule", "rules"))
	fmt.Fprintf(w, "capture: %s: %d IP %s in %d %s\n", o.PcapPath, total, plural(total, "packet", "packets"), len(order), plural(len(order), "flow", "flows"))
	if len(o.Annotate) > 0 {
		fmt.Fprintf(w, "annotations: %s\n", strings.Join(o.Annotate, " "))
	}
	if len(paths) > 0 {
		var ps []string
		for _, p := range paths {
			var kv []string
			for _, k := range p.order {
				kv = append(kv, k+"="+p.labels[k])
			}
			ps = append(ps, p.name+"{"+strings.Join(kv, ",")+"}")
		}
		fmt.Fprintf(w, "paths: %s\n", strings.Join(ps, " "))
	}
	for i, fs := range order {
		fmt.Fprintf(w, "\nflow %d: %s, first packet %d, %d %s\n", i+1, fs.describe(), fs.first, fs.packets, plural(fs.packets, "packet", "packets"))
		groups := make([]*explainGroup, 0, len(fs.groups))
		for _, g := range fs.groups {
			groups = append(groups, g)
		}
		sort.Slice(groups, func(a, b int) bool { return groups[a].first < groups[b].first })
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "  PACKETS\tCLASS\tRULES\tDIRECTIVE")
		if len(paths) > 0 {
			fmt.Fprint(tw, "\tPATHS")
		}
		fmt.Fprintln(tw)
		for _, g := range groups {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s", g.packets, g.class, ruleIDs(set, &g.rules), g.directive)
			if len(paths) > 0 {
				fmt.Fprintf(tw, "\t%s", g.paths)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tPRIORITY\tPACKETS")
	for i := 0; i < set.Len(); i++ {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", set.Rule(i).ID, set.Rule(i).Priority, perRule[i])
	}
	fmt.Fprintf(tw, "(no rule)\t-\t%d\n", noRule)
	return tw.Flush()
}

// packetClass names the kind of packet inside a flow: its frame type and
// traffic class when it has them.
func packetClass(md *classify.Metadata) string {
	var parts []string
	if md.Has(classify.KeyFrameType) {
		parts = append(parts, "frame_type="+md.FrameType.String())
	}
	if md.Has(classify.KeyClass) {
		parts = append(parts, "class="+md.Class())
	}
	if md.Has(classify.KeyFragment) {
		parts = append(parts, "fragment="+md.Fragment.String())
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func flowLabel(md *classify.Metadata) string {
	v, _ := md.AppendValue(nil, classify.KeyProto)
	s := string(v)
	if md.Has(classify.KeyDSCP) && md.DSCP != 0 {
		s += " dscp=" + strconv.Itoa(int(md.DSCP))
	}
	if md.Has(classify.KeyCodec) {
		s += " codec=" + md.Codec.String()
	}
	return s
}

func (fs *explainFlowStats) describe() string {
	k := fs.key
	s := fs.label + " " + endpoint(k.src, k.sport) + " -> " + endpoint(k.dst, k.dport)
	if k.rtp {
		s += fmt.Sprintf(" rtp_ssrc=0x%08x", k.ssrc)
	}
	return s
}

func endpoint(a netip.Addr, port uint16) string {
	if port == 0 {
		return a.String()
	}
	return netip.AddrPortFrom(a, port).String()
}

func ruleIDs(set *rules.Set, m *rules.RuleMask) string {
	var ids []string
	for i := 0; i < set.Len(); i++ {
		if m.Has(i) {
			ids = append(ids, set.Rule(i).ID)
		}
	}
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, ",")
}

// resolvePaths shows, for each preference in order, the paths that carry
// the label, as the scheduler would try them: "cost_class=free→sat"; a
// preference no path carries falls through, and with none left the
// scheduler uses its default selection.
func resolvePaths(d *rules.Directive, paths []*explainPath) string {
	prefs := d.PreferenceList()
	if len(prefs) == 0 {
		return "any (no preference)"
	}
	var parts []string
	matched := false
	for _, p := range prefs {
		var names []string
		for _, path := range paths {
			if path.labels[p.Key] == p.Value {
				names = append(names, path.name)
			}
		}
		if len(names) == 0 {
			parts = append(parts, p.Key+"="+p.Value+"→none")
			continue
		}
		matched = true
		parts = append(parts, p.Key+"="+p.Value+"→"+strings.Join(names, ","))
	}
	if !matched {
		parts = append(parts, "(default selection)")
	}
	return strings.Join(parts, " ")
}
