package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
)

// Video is the bench scenario of legacy video (legacy.go): a pre-encoded
// H.264 file of --duration, as RTP and as MPEG-TS over UDP, through the
// bond and over the best single path, on three sets of paths:
//
//   - loss: three paths with 1.5 % random loss, 20/30/40 ms (LossScenario);
//   - cellular: the three cellular paths of S1 (emu.CellularScenario);
//   - s2: the Starlink and metered paths of S2, the paper setting (emu.LEOPaperScenario).
//
// Configurations are named <scenario>-<format>-bond and
// <scenario>-<format>-single; single runs each path alone and keeps the
// one with the most bit-exact frames.
const Video = "video"

var videoScenarios = []string{"loss", "cellular", "s2"}

func videoConfigNames() []string {
	var names []string
	for _, sc := range videoScenarios {
		for _, f := range []string{FormatRTP, FormatTS} {
			names = append(names, sc+"-"+f+"-bond", sc+"-"+f+"-single")
		}
	}
	return names
}

// videoReport is results.json of the video scenario.
type videoReport struct {
	benchHeader
	Configs []VideoResult `json:"configs"`
}

// videoScenario returns the paths of scenario name.
func videoScenario(name string, o Options) (emu.Scenario, error) {
	switch name {
	case "cellular":
		return emu.CellularScenario(o.Traces, o.Seed)
	case "s2":
		return emu.LEOPaperScenario(o.Traces, o.Seed)
	}
	return LossScenario(), nil
}

func runVideo(ctx context.Context, o Options, out io.Writer) error {
	rep := videoReport{benchHeader: benchHeader{Scenario: Video, Mode: "netns", Seed: o.Seed, DurationS: o.Duration.Seconds(),
		Started: time.Now().UTC(), Command: o.commandLine()}}
	src, err := MakeVideoSource(ctx, o.Out, max(int(o.Duration.Seconds()), 1))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bondd bench video: %d frames of H.264 (640x360, %d fps, GOP %d), seed %d\n", len(src.MD5), legacyFPS, legacyGOP, o.Seed)
	for _, scName := range videoScenarios {
		sc, err := videoScenario(scName, o)
		if err != nil {
			return err
		}
		for _, tr := range scenarioTraces(sc, o.Traces) {
			if !slices.Contains(rep.Traces, tr) {
				rep.Traces = append(rep.Traces, tr)
			}
		}
		for _, f := range []string{FormatRTP, FormatTS} {
			for _, mode := range []string{"bond", "single"} {
				name := scName + "-" + f + "-" + mode
				if !o.selected(name) {
					continue
				}
				var best VideoResult
				for i := range sc.Paths {
					run := sc
					if mode == "single" {
						run.Paths = sc.Paths[i : i+1]
					}
					r, err := videoRun(ctx, o, run, src, f, name)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					if mode == "single" {
						fmt.Fprintf(out, "  %s over %s alone: %d bit-exact\n", name, sc.Paths[i].Name, r.BitExact)
					}
					if i == 0 || r.BitExact > best.BitExact || r.BitExact == best.BitExact && r.Decodable > best.Decodable {
						best = r
					}
					if mode == "bond" {
						break
					}
				}
				rep.Configs = append(rep.Configs, best)
				c := best.Counters
				fmt.Fprintf(out, "%-20s frames %d bit-exact %d decodable %d continuity errors %d rtp missed %d | data %d parity %d fec recovered %d lost %d; reseq held %d skipped %d late %d; drops %v\n",
					name, best.Frames, best.BitExact, best.Decodable, best.ContinuityErrors, best.RTPMissed,
					c.DataSent, c.ParitySent, c.FECRecovered, c.FECLost, c.ReseqHeld, c.ReseqSkipped, c.ReseqLate, c.Drops)
			}
		}
	}
	return writeResults(o.Out, rep, videoMarkdown(rep), out)
}

// videoRun streams src once over the paths of sc.
func videoRun(ctx context.Context, o Options, sc emu.Scenario, src *VideoSource, format, name string) (VideoResult, error) {
	bed, err := demo.NewBed(demo.BedOptions{Scenario: sc, Seed: o.Seed}, o.Inprocess, io.Discard)
	if err != nil {
		return VideoResult{}, err
	}
	defer bed.Close()
	if err := demo.WaitPaths(ctx, bed.Edge, len(sc.Paths)); err != nil {
		return VideoResult{}, err
	}
	return StreamVideo(ctx, bed, src, format, name, o.Out, o.Drain)
}

// videoMarkdown renders results.md of the video scenario.
func videoMarkdown(rep videoReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# bondd bench video\n\n`%s`\n\n", rep.Command)
	b.WriteString("| configuration | format | frames | bit-exact | decodable | continuity errors | RTP missed |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range rep.Configs {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d |\n", c.Name, c.Format, c.Frames, c.BitExact, c.Decodable, c.ContinuityErrors, c.RTPMissed)
	}
	return b.String()
}
