// Package emuconfig reads the config file of `bondd emu --config FILE` (one
// or more emu relays, each with a link model per direction) and runs the
// relays it describes until interrupted. The file format is documented in
// docs/emu.md; the example is docs/examples/emu.yaml.
package emuconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/yamlfile"
)

// emuFile is the top level of a `bondd emu` config file.
type emuFile struct {
	// TracesDir is the folder relative trace paths and `model` read from;
	// relative to the config file. Default: the config file's directory
	// for trace paths, emu.DefaultTracesDir() for models.
	TracesDir string `yaml:"traces_dir"`
	// Seed is the default seed; relay i without its own seed gets Seed+i.
	Seed uint64 `yaml:"seed"`
	// StatsIntervalMs is how often per-relay stats are printed; default
	// 5000, negative: only on exit.
	StatsIntervalMs int            `yaml:"stats_interval_ms"`
	Relays          []emuRelayFile `yaml:"relays"`
}

// emuRelayFile is one relay.
type emuRelayFile struct {
	Name     string       `yaml:"name"`
	Listen   string       `yaml:"listen"`   // host:port the clients send to
	Upstream string       `yaml:"upstream"` // host:port relayed to
	Seed     *uint64      `yaml:"seed"`
	Model    string       `yaml:"model"` // scenario/path, e.g. cellular/att
	Up       *emuLinkFile `yaml:"up"`
	Down     *emuLinkFile `yaml:"down"`
}

// emuLinkFile is one direction's link model; see emu.LinkConfig.
type emuLinkFile struct {
	DelayMs        float64        `yaml:"delay_ms"`
	JitterMs       float64        `yaml:"jitter_ms"`
	Reorder        bool           `yaml:"reorder"`
	LossFrac       float64        `yaml:"loss_frac"`
	GilbertElliott *emuGEFile     `yaml:"gilbert_elliott"`
	RateMbps       float64        `yaml:"rate_mbps"`
	QueueBytes     int            `yaml:"queue_bytes"`
	QueueMs        float64        `yaml:"queue_ms"`
	Mahimahi       string         `yaml:"mahimahi"`
	Starlink       *emuStarlink   `yaml:"starlink"`
	FiveGophers    *emuFiveGopher `yaml:"fivegophers"`
	RTTSamples     *emuRTTFile    `yaml:"rtt_samples"`
	TraceOffsetMs  float64        `yaml:"trace_offset_ms"`
	Outages        *emuOutageFile `yaml:"outages"`
	WallClock      bool           `yaml:"wall_clock"`
}

type emuGEFile struct {
	PGoodBad float64 `yaml:"p_good_bad"`
	PBadGood float64 `yaml:"p_bad_good"`
	LossGood float64 `yaml:"loss_good"`
	LossBad  float64 `yaml:"loss_bad"`
}

type emuStarlink struct {
	File      string `yaml:"file"`
	Direction string `yaml:"direction"` // up or down; default: the link's own
}

type emuFiveGopher struct {
	File    string `yaml:"file"`
	Carrier string `yaml:"carrier"`
}

type emuRTTFile struct {
	File     string  `yaml:"file"`
	Carrier  string  `yaml:"carrier"`
	Location string  `yaml:"location"`
	EveryMs  float64 `yaml:"every_ms"`
}

type emuOutageFile struct {
	PeriodMs    float64   `yaml:"period_ms"`
	AtMs        []float64 `yaml:"at_ms"`
	PhaseMs     float64   `yaml:"phase_ms"`
	MedianMs    float64   `yaml:"median_ms"`
	MinMs       float64   `yaml:"min_ms"`
	MaxMs       float64   `yaml:"max_ms"`
	Sigma       float64   `yaml:"sigma"`
	DurationsMs []float64 `yaml:"durations_ms"`
}

// Relay is a relay ready to start.
type Relay struct {
	Name     string
	Listen   string         // host:port the clients send to
	Upstream netip.AddrPort // relayed to
	Seed     uint64         // seed of the link models
	Up, Down emu.LinkConfig // toward Upstream, toward the clients
}

// Config is a loaded and checked config file.
type Config struct {
	StatsInterval time.Duration // 0: only on exit
	Relays        []Relay
}

// Run starts the relays of cfg, prints their stats every
// cfg.StatsInterval and when ctx ends, then stops them.
func Run(ctx context.Context, cfg *Config, out io.Writer, log *slog.Logger) error {
	var relays []*emu.Relay
	defer func() {
		for _, r := range relays {
			r.Close()
		}
	}()
	for _, rs := range cfg.Relays {
		pc, err := net.ListenPacket("udp", rs.Listen)
		if err != nil {
			return fmt.Errorf("emu: relay %s: %w", rs.Name, err)
		}
		r, err := emu.NewRelay(emu.Options{
			Listen: pc, Upstream: rs.Upstream, Up: rs.Up, Down: rs.Down, Seed: rs.Seed,
			Logger: log.With("relay", rs.Name),
		})
		if err != nil {
			pc.Close()
			return fmt.Errorf("emu: relay %s: %w", rs.Name, err)
		}
		relays = append(relays, r)
		fmt.Fprintf(out, "%s: listening on %s, relaying to %s\n", rs.Name, r.Addr(), rs.Upstream)
	}
	var tick <-chan time.Time
	if cfg.StatsInterval > 0 {
		t := time.NewTicker(cfg.StatsInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "final stats:")
			printEmuStats(out, cfg, relays)
			return nil
		case <-tick:
			printEmuStats(out, cfg, relays)
		}
	}
}

func printEmuStats(out io.Writer, cfg *Config, relays []*emu.Relay) {
	for i, r := range relays {
		st := r.Stats()
		for _, d := range []struct {
			name string
			s    emu.DirStats
		}{{"up", st.Up}, {"down", st.Down}} {
			s := d.s
			fmt.Fprintf(out, "%s %-4s in %d pkt %s, delivered %d pkt %s, drop loss %d queue %d outage %d other %d, queued %d, late p50 %v p99 %v max %v\n",
				cfg.Relays[i].Name, d.name, s.Packets, emuBytes(s.Bytes), s.Delivered, emuBytes(s.DeliveredBytes),
				s.DropLoss, s.DropQueue, s.DropOutage, s.DropOther, s.Scheduled,
				s.LateP50.Round(time.Microsecond), s.LateP99.Round(time.Microsecond), s.LateMax.Round(time.Microsecond))
		}
	}
}

func emuBytes(b uint64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

// Load reads and checks a `bondd emu` config file. Errors name
// the file and line: "FILE:LINE: field: problem".
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	return Parse(path, data)
}

// Parse parses config data; name is the file name for errors and
// relative paths.
func Parse(name string, data []byte) (*Config, error) {
	var f emuFile
	if err := yamlfile.Decode(name, data, &f); err != nil {
		if errors.Is(err, yamlfile.ErrEmpty) {
			return nil, fmt.Errorf("%s: empty file, want relays", name)
		}
		return nil, err
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	p := &emuParser{name: name, root: &root, dir: filepath.Dir(name)}
	return p.config(&f)
}

// emuParser turns a decoded file into relay specs, finding the line of any
// field it complains about in the YAML tree.
type emuParser struct {
	name   string
	root   *yaml.Node
	dir    string            // config file's directory
	traces string            // traces_dir, resolved
	cache  map[string]any    // loaded traces by kind and path
	seen   map[string]string // listen address → relay name
}

// errorf returns "FILE:LINE: field: message" for the field at path (keys
// and indexes from the document root).
func (p *emuParser) errorf(path []any, format string, args ...any) error {
	field := ""
	for _, k := range path {
		switch k := k.(type) {
		case string:
			if field != "" {
				field += "."
			}
			field += k
		case int:
			field += fmt.Sprintf("[%d]", k)
		}
	}
	msg := fmt.Sprintf(format, args...)
	if line := yamlfile.LineOf(p.root, path); line > 0 {
		return fmt.Errorf("%s:%d: %s: %s", p.name, line, field, msg)
	}
	return fmt.Errorf("%s: %s: %s", p.name, field, msg)
}

func (p *emuParser) config(f *emuFile) (*Config, error) {
	cfg := &Config{StatsInterval: 5 * time.Second}
	switch {
	case f.StatsIntervalMs > 0:
		cfg.StatsInterval = time.Duration(f.StatsIntervalMs) * time.Millisecond
	case f.StatsIntervalMs < 0:
		cfg.StatsInterval = 0
	}
	if f.TracesDir != "" {
		p.traces = f.TracesDir
		if !filepath.IsAbs(p.traces) {
			p.traces = filepath.Join(p.dir, p.traces)
		}
		if fi, err := os.Stat(p.traces); err != nil || !fi.IsDir() {
			if p.traces != f.TracesDir {
				return nil, p.errorf([]any{"traces_dir"}, "%s (%s, relative to the config file) is not a folder", f.TracesDir, p.traces)
			}
			return nil, p.errorf([]any{"traces_dir"}, "%s is not a folder", p.traces)
		}
	}
	if len(f.Relays) == 0 {
		return nil, p.errorf([]any{"relays"}, "no relays")
	}
	p.cache = map[string]any{}
	p.seen = map[string]string{}
	for i := range f.Relays {
		rs, err := p.relay(f, i)
		if err != nil {
			return nil, err
		}
		cfg.Relays = append(cfg.Relays, rs)
	}
	return cfg, nil
}

func (p *emuParser) relay(f *emuFile, i int) (Relay, error) {
	r := &f.Relays[i]
	at := func(keys ...any) []any { return append([]any{"relays", i}, keys...) }
	rs := Relay{Name: r.Name, Seed: f.Seed + uint64(i)}
	if rs.Name == "" {
		rs.Name = fmt.Sprintf("relay%d", i)
	}
	if r.Seed != nil {
		rs.Seed = *r.Seed
	}
	if r.Listen == "" {
		return rs, p.errorf(at(), "listen is required (host:port the clients send to)")
	}
	if _, _, err := net.SplitHostPort(r.Listen); err != nil {
		return rs, p.errorf(at("listen"), "want host:port, have %q", r.Listen)
	}
	if other, ok := p.seen[r.Listen]; ok {
		return rs, p.errorf(at("listen"), "%s is already used by relay %s", r.Listen, other)
	}
	p.seen[r.Listen] = rs.Name
	rs.Listen = r.Listen
	if r.Upstream == "" {
		return rs, p.errorf(at(), "upstream is required (host:port to relay to)")
	}
	ua, err := net.ResolveUDPAddr("udp", r.Upstream)
	if err != nil || ua.Port == 0 || ua.IP == nil {
		return rs, p.errorf(at("upstream"), "want host:port with a host and a port, have %q", r.Upstream)
	}
	rs.Upstream = netip.AddrPortFrom(ua.AddrPort().Addr().Unmap(), ua.AddrPort().Port())

	if r.Model != "" {
		if r.Up != nil || r.Down != nil {
			return rs, p.errorf(at("model"), "a relay takes either model or up/down, not both")
		}
		up, down, err := p.model(r.Model, rs.Seed)
		if err != nil {
			return rs, p.errorf(at("model"), "%v", err)
		}
		rs.Up, rs.Down = up, down
		return rs, nil
	}
	for _, d := range []struct {
		key  string
		dir  emu.Direction
		link *emuLinkFile
		out  *emu.LinkConfig
	}{{"up", emu.Up, r.Up, &rs.Up}, {"down", emu.Down, r.Down, &rs.Down}} {
		if d.link == nil {
			continue // a perfect link
		}
		lc, err := p.link(d.link, d.dir, at(d.key))
		if err != nil {
			return rs, err
		}
		*d.out = lc
	}
	return rs, nil
}

// model returns the links of a built-in scenario path, "scenario/path".
func (p *emuParser) model(m string, seed uint64) (up, down emu.LinkConfig, err error) {
	scName, pathName, ok := strings.Cut(m, "/")
	dir := p.traces
	if dir == "" {
		dir = emu.DefaultTracesDir()
	}
	var sc emu.Scenario
	switch {
	case ok && scName == "cellular":
		sc, err = emu.CellularScenario(dir, seed)
	case ok && scName == "leo":
		sc, err = emu.LEOScenario(dir, seed)
	default:
		return up, down, fmt.Errorf("unknown model %q; want cellular/att, cellular/tmobile, cellular/verizon, leo/starlink or leo/metered", m)
	}
	if err != nil {
		return up, down, err
	}
	var names []string
	for _, pm := range sc.Paths {
		if pm.Name == pathName {
			return pm.Up, pm.Down, nil
		}
		names = append(names, scName+"/"+pm.Name)
	}
	return up, down, fmt.Errorf("unknown model %q; want one of %s", m, strings.Join(names, ", "))
}

// ms converts a non-negative number of ms from the file.
func emuMs(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func (p *emuParser) link(l *emuLinkFile, dir emu.Direction, at []any) (emu.LinkConfig, error) {
	field := func(k string) []any { return append(append([]any{}, at...), k) }
	for _, c := range []struct {
		key string
		v   float64
	}{{"delay_ms", l.DelayMs}, {"jitter_ms", l.JitterMs}, {"rate_mbps", l.RateMbps}, {"queue_ms", l.QueueMs}, {"trace_offset_ms", l.TraceOffsetMs}} {
		if c.v < 0 || c.v != c.v {
			return emu.LinkConfig{}, p.errorf(field(c.key), "must be ≥ 0, have %v", c.v)
		}
	}
	if l.LossFrac < 0 || l.LossFrac > 1 {
		return emu.LinkConfig{}, p.errorf(field("loss_frac"), "a fraction in [0, 1], have %v (1 %% is 0.01)", l.LossFrac)
	}
	if l.QueueBytes < 0 {
		return emu.LinkConfig{}, p.errorf(field("queue_bytes"), "must be ≥ 0, have %d", l.QueueBytes)
	}
	lc := emu.LinkConfig{
		Delay:       emuMs(l.DelayMs),
		Jitter:      emuMs(l.JitterMs),
		Reorder:     l.Reorder,
		Loss:        l.LossFrac,
		Rate:        emu.BitRate(l.RateMbps * 1e6),
		QueueBytes:  l.QueueBytes,
		QueueDelay:  emuMs(l.QueueMs),
		TraceOffset: emuMs(l.TraceOffsetMs),
		WallClock:   l.WallClock,
	}
	if g := l.GilbertElliott; g != nil {
		lc.GilbertElliott = &emu.GilbertElliott{PGoodBad: g.PGoodBad, PBadGood: g.PBadGood, LossGood: g.LossGood, LossBad: g.LossBad}
	}
	if l.Mahimahi != "" {
		tr, err := p.load("mahimahi", l.Mahimahi, func(path string) (any, error) { return emu.LoadMahimahi(path) })
		if err != nil {
			return lc, p.errorf(field("mahimahi"), "%v", err)
		}
		lc.Mahimahi = tr.(*emu.MahimahiTrace)
	}
	if s := l.Starlink; s != nil {
		d := dir
		switch strings.ToLower(s.Direction) {
		case "":
		case "up", "uplink":
			d = emu.Up
		case "down", "downlink":
			d = emu.Down
		default:
			return lc, p.errorf(field("starlink"), "direction %q, want up or down", s.Direction)
		}
		if s.File == "" {
			return lc, p.errorf(field("starlink"), "file is required")
		}
		tr, err := p.load("starlink-"+d.String(), s.File, func(path string) (any, error) { return emu.LoadStarlinkCSV(path, d) })
		if err != nil {
			return lc, p.errorf(field("starlink"), "%v", err)
		}
		lc.Series = tr.(*emu.Series)
	}
	if g := l.FiveGophers; g != nil {
		if lc.Series != nil {
			return lc, p.errorf(field("fivegophers"), "a link takes one series trace (starlink or fivegophers)")
		}
		if g.File == "" || g.Carrier == "" {
			return lc, p.errorf(field("fivegophers"), "file and carrier are required")
		}
		tr, err := p.load("5gophers-"+g.Carrier, g.File, func(path string) (any, error) { return emu.Load5GophersCSV(path, g.Carrier) })
		if err != nil {
			return lc, p.errorf(field("fivegophers"), "%v", err)
		}
		lc.Series = tr.(*emu.Series)
	}
	if s := l.RTTSamples; s != nil {
		if s.File == "" || s.Carrier == "" {
			return lc, p.errorf(field("rtt_samples"), "file and carrier are required")
		}
		if s.EveryMs < 0 {
			return lc, p.errorf(field("rtt_samples"), "every_ms must be ≥ 0")
		}
		tr, err := p.load("rtt-"+s.Carrier+"-"+s.Location, s.File, func(path string) (any, error) {
			return emu.LoadRTTSamples(path, s.Carrier, s.Location)
		})
		if err != nil {
			return lc, p.errorf(field("rtt_samples"), "%v", err)
		}
		rtts := tr.([]time.Duration)
		lc.DelaySamples = make([]time.Duration, len(rtts))
		for i, r := range rtts {
			lc.DelaySamples[i] = r / 2 // one way
		}
		lc.DelaySampleInterval = emuMs(s.EveryMs)
	}
	if o := l.Outages; o != nil {
		out := &emu.Outages{
			Period: emuMs(o.PeriodMs), Phase: emuMs(o.PhaseMs), Median: emuMs(o.MedianMs),
			Min: emuMs(o.MinMs), Max: emuMs(o.MaxMs), Sigma: o.Sigma,
		}
		for _, a := range o.AtMs {
			out.At = append(out.At, emuMs(a))
		}
		for _, d := range o.DurationsMs {
			out.Durations = append(out.Durations, emuMs(d))
		}
		lc.Outages = out
	}
	if err := lc.Validate(); err != nil {
		return lc, p.errorf(at, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), emu.ErrInvalidConfig.Error()), ": "))
	}
	return lc, nil
}

// load reads a trace file once per (kind, path); relative paths are
// resolved against traces_dir, or the config file's directory.
func (p *emuParser) load(kind, file string, read func(string) (any, error)) (any, error) {
	path := file
	if !filepath.IsAbs(path) {
		base := p.traces
		if base == "" {
			base = p.dir
		}
		path = filepath.Join(base, path)
	}
	key := kind + "\x00" + path
	if v, ok := p.cache[key]; ok {
		return v, nil
	}
	v, err := read(path)
	if err != nil {
		return nil, err
	}
	p.cache[key] = v
	return v, nil
}
