package main

import (
	"errors"
	"maps"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/inspect"
)

// newClassifyCmd is `bondd classify --pcap FILE`: it runs the classifier over
// a capture and prints what rules would see, per packet or per flow.
func newClassifyCmd() *cobra.Command {
	var (
		pcapPath    string
		configPath  string
		sdpPath     string
		summary     bool
		asJSON      bool
		rtpPorts    []string
		rtpPTs      []string
		noHeuristic bool
	)
	cmd := &cobra.Command{
		Use:   "classify --pcap FILE [--config FILE]",
		Short: "Print the metadata rules would match, for each packet of a capture",
		Long: `Reads a pcap or pcapng file (Ethernet, raw IP, Linux SLL/SLL2 or
Null/Loopback link types; gzip allowed) and runs bondd's classifier over every
IP packet in order, with the same per-stream state as the daemon.

Default output: one line per IP packet, its 0-based frame index in the capture
and every metadata key as rules see it (key=value). Non-IP frames are skipped
but keep their index. --json prints one JSON object per packet instead, with
"index" and the keys (numbers as JSON numbers). --summary prints one line per
flow (protocol, addresses, ports and RTP SSRC) with packet and keyframe counts;
with --json, one JSON object per flow.

--config reads the classifier's settings from a daemon config file's classify
section: RTP ports, payload types, the RTP heuristic and the traffic classes,
whose class and labels then show as keys. The rest of the file must be valid
too, but the files it names (credentials) need not exist here. --rtp-ports,
--rtp-pt and --no-heuristic, when given, replace the file's setting.

--sdp reads the payload types from an SDP file, like the one the encoder
writes (ffmpeg -sdp_file): each a=rtpmap line maps its payload type to its
codec. --rtp-pt entries take precedence over it.

With --summary, an RTP flow on a dynamic payload type whose codec could not be
told from its payloads shows codec "unrecognised", with a note saying how to
name it (--rtp-pt or --sdp).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pcapPath == "" {
				return errors.New("classify: --pcap FILE is required")
			}
			opts, err := inspect.ClassifyOptions(rtpPorts, rtpPTs, noHeuristic)
			if err != nil {
				return err
			}
			if configPath != "" {
				flags := opts
				cfg, err := config.LoadWith(configPath, config.Options{SkipFileChecks: true})
				if err != nil {
					return err
				}
				if opts, err = cfg.Classify.Options(); err != nil {
					return err
				}
				f := cmd.Flags()
				if f.Changed("rtp-ports") {
					opts.RTPPorts = flags.RTPPorts
				}
				if f.Changed("rtp-pt") {
					opts.PayloadTypes = flags.PayloadTypes
				}
				if f.Changed("no-heuristic") {
					opts.NoHeuristic = flags.NoHeuristic
				}
			}
			if sdpPath != "" {
				m, err := classify.LoadSDP(sdpPath)
				if err != nil {
					return err
				}
				maps.Copy(m, opts.PayloadTypes) // --rtp-pt (or the config's) win
				opts.PayloadTypes = m
			}
			return inspect.Classify(cmd.OutOrStdout(), pcapPath, opts, summary, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pcapPath, "pcap", "", "capture file to read (pcap or pcapng)")
	f.StringVar(&sdpPath, "sdp", "", "SDP file whose a=rtpmap lines give payload types and codecs (e.g. ffmpeg -sdp_file)")
	f.StringVar(&configPath, "config", "", "daemon config file whose classify section to use (classes, RTP ports, payload types)")
	f.BoolVar(&summary, "summary", false, "print one line per flow instead of one per packet")
	f.BoolVar(&asJSON, "json", false, "print JSON lines")
	f.StringSliceVar(&rtpPorts, "rtp-ports", nil, "UDP ports or ranges carrying RTP, e.g. 5004,6000-6010 (replaces the config's rtp_ports)")
	f.StringSliceVar(&rtpPTs, "rtp-pt", nil, "RTP payload type to codec, e.g. 96=h264,97=vp8 (as in SDP a=rtpmap; replaces the config's payload_types)")
	f.BoolVar(&noHeuristic, "no-heuristic", false, "find RTP only on the RTP ports and payload types (overrides the config's rtp_heuristic)")
	return cmd
}
