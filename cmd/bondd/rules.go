package main

// bondd rules check and bondd rules explain: the cobra commands; their work
// is done in internal/inspect.

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/inspect"
)

// newRulesCmd is `bondd rules`, the parent of check and explain.
func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check rule files and explain what they do to a capture",
		Long: `Rule files steer traffic classes: they match packet metadata and state
delivery preferences (priority, path preferences, FEC, duplication,
deadlines). See docs/rules.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRulesCheckCmd(), newRulesExplainCmd())
	return cmd
}

func newRulesCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a rule file and print its rules in evaluation order",
		Long: `Parses and compiles a rule file as the daemon would. On success it prints the
rules in evaluation order (rule priority, highest first), with their match
entries and actions, and any warnings (unknown actions, which are skipped).
On failure it prints every error as FILE:LINE: message and exits non-zero.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspect.RulesCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
}

func newRulesExplainCmd() *cobra.Command {
	var o inspect.ExplainOptions
	cmd := &cobra.Command{
		Use:   "explain --rules FILE --pcap CAPTURE [--labels PATH=KEY=VALUE[,KEY=VALUE...]]...",
		Short: "Show which rules match each flow of a capture and the directives they produce",
		Long: `Classifies every IP packet of a capture (as bondd classify does), evaluates
the rule file on it and prints, for each flow, one line per class of packets
that got the same treatment: how many packets, which rules matched, and the
merged directive. With --labels describing the paths, each directive's
preferences are resolved to the paths that carry the preferred labels, as the
scheduler would try them. The annotations pending_iframe and leo_state are not
in a capture; --annotate sets them for every packet, to see what the rules do
while an I-frame is in flight or during a LEO reconfiguration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.RulesPath == "" || o.PcapPath == "" {
				return errors.New("rules explain: --rules FILE and --pcap CAPTURE are required")
			}
			return inspect.RulesExplain(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.RulesPath, "rules", "", "rule file")
	f.StringVar(&o.PcapPath, "pcap", "", "capture file (pcap or pcapng)")
	f.StringArrayVar(&o.Labels, "labels", nil, "a path and its labels, e.g. sat=cost_class=free,link_type=satellite (repeat per path)")
	f.StringArrayVar(&o.Annotate, "annotate", nil, "set an annotation on every packet: pending_iframe=true, leo_state=reconf or budget_used=SHARE (repeatable)")
	f.StringSliceVar(&o.RTPPorts, "rtp-ports", nil, "UDP ports or ranges carrying RTP, e.g. 5004,6000-6010")
	f.StringSliceVar(&o.RTPPTs, "rtp-pt", nil, "RTP payload type to codec, e.g. 96=h264 (as in SDP a=rtpmap)")
	f.BoolVar(&o.NoHeuristic, "no-heuristic", false, "find RTP only on --rtp-ports and --rtp-pt")
	return cmd
}
