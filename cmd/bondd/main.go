// Command bondd is a userspace multipath bonding VPN: it carries the IP
// packets of unmodified applications over several uplinks at once, as QUIC
// DATAGRAMs (RFC 9221), between an edge and a concentrator.
//
// Subcommands: run, status, usage, demo, bench, emu, classify, rules, version. See
// README.md.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/bench"
)

func main() {
	bench.RunScaleChildren() // a child process of bondd bench scale (edges, concentrator, flood) exits here
	root := &cobra.Command{
		Use:           "bondd",
		Short:         "Multipath bonding VPN over QUIC DATAGRAMs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newRunCmd(),
		newStatusCmd(),
		newDrainCmd(),
		newDemoCmd(),
		newBenchCmd(),
		newVersionCmd(),
		newClassifyCmd(),
		newEmuCmd(),
		newRulesCmd(),
		newUsageCmd(),
	)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "bondd:", err)
		os.Exit(1)
	}
}
