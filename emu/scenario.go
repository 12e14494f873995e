package emu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Scenario is a set of emulated paths for one experiment.
type Scenario struct {
	// Name identifies the scenario: "cellular" or "leo".
	Name string
	// Source lists the trace files replayed (relative to the traces folder,
	// comma-separated), or is "builtin" for the fitted built-in models.
	Source string
	// Paths are the emulated uplinks, in a fixed order.
	Paths []PathModel
}

// PathModel is one emulated path: what to configure on a [Relay] placed
// between the edge's uplink socket and the concentrator.
type PathModel struct {
	// Name is the path's short name ("att", "starlink", …).
	Name string
	// Labels are path labels for bondd's config (link_type, carrier,
	// cost_class).
	Labels map[string]string
	// Up models edge→concentrator (the relay's client→upstream), Down
	// concentrator→edge.
	Up, Down LinkConfig
	// Files are the trace files this path replays (absolute or as found
	// under the traces folder); empty for built-in models.
	Files []string
	// Seed is the seed to give the path's Relay (Options.Seed), derived
	// from the scenario seed and the path name.
	Seed uint64
}

// Scenario constants, with the reasons for them.
const (
	// CellularQueueBytes is the drop-tail queue of each cellular path:
	// 100 × 1500 bytes (mm-link's common "droptail packets=100"); at the
	// traces' mean capacities (5.2, 12.8, 5.0 Mbit/s) that is 230, 94 and
	// 240 ms of buffering, in the range of LTE base-station buffers.
	CellularQueueBytes = 100 * 1500
	// leoQueueDelay bounds the Starlink and terrestrial queues: 100 ms of
	// the current capacity.
	leoQueueDelay = 100 * time.Millisecond
	// MeteredDelay and MeteredRate describe the terrestrial metered path of
	// the LEO scenario: the design's "15 ms metered path" (one-way delay),
	// with a 20 Mbit/s capacity, enough for the S2 video on its own.
	MeteredDelay = 15 * time.Millisecond
	MeteredRate  = 20 * Mbps
	// builtinSeconds is the length of a generated built-in capacity series
	// (it loops afterwards).
	builtinSeconds = 1200
)

// cellularPath pairs a Mahimahi trace with a 5Gophers carrier for base RTT.
//
// Pairing: 5Gophers measured Sprint, T-Mobile and Verizon; T-Mobile and
// Verizon pair with themselves, and AT&T, absent from 5Gophers, takes
// Sprint's samples, the remaining carrier. Only the US-East samples are
// used: the Saturator traces were recorded while driving around Boston,
// and the US-West samples add a coast-to-coast propagation delay.
type cellularPath struct {
	name       string
	mahimahi   string // file under cellular/mahimahi (its .down is used both ways)
	rttCarrier string // carrier in all-carriers-rtt.csv
	fit        *capacityFit
	rtt        *rttFit
}

func cellularPaths() []cellularPath {
	return []cellularPath{
		{"att", "ATT-LTE-driving.down", "SPRINT", &builtinATT, &builtinRTTSprint},
		{"tmobile", "TMobile-LTE-driving.down", "TMOBILE", &builtinTMobile, &builtinRTTTMobile},
		{"verizon", "Verizon-LTE-short.down", "VERIZON", &builtinVerizon, &builtinRTTVerizon},
	}
}

const rttLocation = "US-East"

// CellularScenario returns three cellular paths for scenario S1 (a vehicle
// with three LTE modems), "att", "tmobile" and "verizon".
//
// With tracesDir set and holding cellular/mahimahi and cellular/5gophers,
// each path replays a real driving trace: Mahimahi ATT-LTE-driving,
// TMobile-LTE-driving and Verizon-LTE-short. Both directions use the
// .down capacity trace: the .up traces are far thinner than the edge's
// 4 Mbit/s load (ATT .up averages 0.83 Mbit/s, TMobile has none), so they
// would measure only queue overflow; the .down traces (5.2, 12.8 and
// 5.0 Mbit/s) keep the paths loaded but not idle. Both directions start at
// the same offset into the trace, chosen by the seed, so they see the same
// radio conditions at the same time. On top come a base one-way delay of
// half a 5Gophers RTT sample of the paired carrier (see cellularPath),
// redrawn every second; a drop-tail queue of [CellularQueueBytes]; and a
// Bernoulli loss floor (see builtinLossFloor).
//
// With tracesDir empty or absent, each path uses the built-in model fitted
// to the same files (see builtin.go) and Source is "builtin". Errors are
// those of reading a trace that is present but malformed.
func CellularScenario(tracesDir string, seed uint64) (Scenario, error) {
	sc := Scenario{Name: "cellular"}
	useTraces := HasCellularTraces(tracesDir)
	var sources []string
	for _, cp := range cellularPaths() {
		pm := PathModel{
			Name:   cp.name,
			Labels: map[string]string{"link_type": "cellular", "carrier": cp.name},
			Seed:   seedFor(seed, cp.name),
		}
		base := LinkConfig{QueueBytes: CellularQueueBytes}
		if useTraces {
			mmRel := filepath.Join("cellular", "mahimahi", cp.mahimahi)
			rttRel := filepath.Join("cellular", "5gophers", "all-carriers-rtt.csv")
			mm, err := LoadMahimahi(filepath.Join(tracesDir, mmRel))
			if err != nil {
				return Scenario{}, fmt.Errorf("emu: cellular scenario: %w", err)
			}
			rtts, err := LoadRTTSamples(filepath.Join(tracesDir, rttRel), cp.rttCarrier, rttLocation)
			if err != nil {
				return Scenario{}, fmt.Errorf("emu: cellular scenario: %w", err)
			}
			owd := make([]time.Duration, len(rtts))
			for i, r := range rtts {
				owd[i] = r / 2
			}
			base.Mahimahi = mm
			base.DelaySamples = owd
			base.TraceOffset = seededOffset(seed, cp.name, mm.Period())
			pm.Files = []string{filepath.Join(tracesDir, mmRel), filepath.Join(tracesDir, rttRel)}
			sources = append(sources, mmRel)
		} else {
			base.Series = cp.fit.series(seedFor(seed, cp.name+"/capacity"), builtinSeconds, "builtin-"+cp.name)
			base.DelaySamples = cp.rtt.owdSamples()
		}
		base.DelaySampleInterval = time.Second
		pm.Up, pm.Down = base, base
		pm.Up.Loss = builtinLossFloor.up
		pm.Down.Loss = builtinLossFloor.down
		sc.Paths = append(sc.Paths, pm)
	}
	if useTraces {
		sources = append(sources, filepath.Join("cellular", "5gophers", "all-carriers-rtt.csv"))
		sc.Source = strings.Join(sources, ", ")
	} else {
		sc.Source = "builtin"
	}
	return sc, nil
}

// LEOScenario returns the two paths of scenario S2: "starlink", a
// satellite path with reconfiguration outages, and "metered", a
// terrestrial metered path (15 ms one way, 20 Mbit/s, lossless).
//
// With tracesDir holding leo/starlink-100ms-lagos/lagos.csv, the Starlink
// path replays it: uplink columns (capacity, one-way delay, loss per
// 100 ms) for Up, downlink columns for Down, its whole minutes looped,
// starting at a whole minute of the trace chosen by the seed. Without
// traces it uses the built-in Starlink model fitted to that file (per-second
// capacity, one-way delay distribution, loss floor outside
// reconfiguration windows). Either way the path has [Outages] at seconds
// 12, 27, 42 and 57 of every minute (log-normal durations, median 58 ms,
// 22–172 ms) with WallClock set, so that, behind a Relay, outages fall on
// those seconds of the UTC minute, where bondd's LEO annotation expects
// them; the trace's own time 0 is second :00, so it stays aligned. The
// queues hold 100 ms at the current capacity.
func LEOScenario(tracesDir string, seed uint64) (Scenario, error) {
	sc := Scenario{Name: "leo"}
	sat := PathModel{
		Name:   "starlink",
		Labels: map[string]string{"link_type": "satellite", "cost_class": "unmetered"},
		Seed:   seedFor(seed, "starlink"),
	}
	base := LinkConfig{QueueDelay: leoQueueDelay, Outages: &Outages{}, WallClock: true, DelaySampleInterval: time.Second}
	rel := filepath.Join("leo", "starlink-100ms-lagos", "lagos.csv")
	if hasFile(tracesDir, rel) {
		path := filepath.Join(tracesDir, rel)
		up, err := LoadStarlinkCSV(path, Up)
		if err != nil {
			return Scenario{}, fmt.Errorf("emu: LEO scenario: %w", err)
		}
		down, err := LoadStarlinkCSV(path, Down)
		if err != nil {
			return Scenario{}, fmt.Errorf("emu: LEO scenario: %w", err)
		}
		// Replay whole minutes only (the lagos trace: 90 of its 90.75), so
		// the loop stays in step with the 60-s reconfiguration schedule.
		minutes := int64(up.Period() / time.Minute)
		if rows := int(time.Duration(minutes) * time.Minute / up.Interval); minutes > 0 && rows < up.Len() && time.Minute%up.Interval == 0 {
			up, down = up.Truncate(rows), down.Truncate(rows)
		}
		off := time.Duration(0)
		if minutes > 0 {
			r := rand.New(rand.NewPCG(seed, seedFor(0, "starlink/offset")))
			off = time.Duration(r.Int64N(minutes)) * time.Minute
		}
		sat.Up, sat.Down = base, base
		sat.Up.Series, sat.Down.Series = up, down
		sat.Up.TraceOffset, sat.Down.TraceOffset = off, off
		sat.Files = []string{path}
		sc.Source = rel
	} else {
		sat.Up, sat.Down = base, base
		sat.Up.Series = builtinLagosUp.series(seedFor(seed, "starlink/up"), builtinSeconds, "builtin-starlink-up")
		sat.Down.Series = builtinLagosDown.series(seedFor(seed, "starlink/down"), builtinSeconds, "builtin-starlink-down")
		sat.Up.DelaySamples = builtinLagosOWDUp.samples()
		sat.Down.DelaySamples = builtinLagosOWDDown.samples()
		sat.Up.Loss, sat.Down.Loss = builtinLossFloor.up, builtinLossFloor.down
		sc.Source = "builtin"
	}
	metered := PathModel{
		Name:   "metered",
		Labels: map[string]string{"link_type": "terrestrial", "cost_class": "metered"},
		Seed:   seedFor(seed, "metered"),
	}
	metered.Up = LinkConfig{Delay: MeteredDelay, Rate: MeteredRate, QueueDelay: leoQueueDelay}
	metered.Down = metered.Up
	sc.Paths = []PathModel{sat, metered}
	return sc, nil
}

// seededOffset returns an offset in [0, period), whole ms, chosen by the
// seed for the named path.
func seededOffset(seed uint64, name string, period time.Duration) time.Duration {
	ms := int64(period / time.Millisecond)
	if ms <= 0 {
		return 0
	}
	r := rand.New(rand.NewPCG(seed, seedFor(0, name+"/offset")))
	return time.Duration(r.Int64N(ms)) * time.Millisecond
}

// HasCellularTraces reports whether dir is laid out like shared/data/traces
// for CellularScenario: it has cellular/mahimahi and cellular/5gophers.
func HasCellularTraces(dir string) bool {
	return dir != "" && hasDir(dir, "cellular", "mahimahi") && hasDir(dir, "cellular", "5gophers")
}

func hasDir(parts ...string) bool {
	if parts[0] == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(parts...))
	return err == nil && fi.IsDir()
}

func hasFile(dir, rel string) bool {
	if dir == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, rel))
	return err == nil && fi.Mode().IsRegular()
}

// DefaultTracesDir returns the absolute path of the shared traces folder,
// ../shared/data/traces, looked up relative to the working directory, then
// to the executable's directory, then to the module root (the nearest
// parent of the working directory holding go.mod), or "" if none of these
// exists. The folder is expected to hold cellular/ and leo/.
func DefaultTracesDir() string {
	rel := filepath.Join("..", "shared", "data", "traces")
	cands := []string{rel}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), rel))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				cands = append(cands, filepath.Join(d, rel))
				break
			}
			p := filepath.Dir(d)
			if p == d {
				break
			}
			d = p
		}
	}
	for _, c := range cands {
		if hasDir(c) {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
			return c
		}
	}
	return ""
}
