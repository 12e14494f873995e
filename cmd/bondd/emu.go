package main

// bondd emu: the cobra command; the config file and the relays are in
// internal/emuconfig.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bondd/bondd/internal/emuconfig"
)

func newEmuCmd() *cobra.Command {
	var (
		cfgPath string
		check   bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "emu --config FILE",
		Short: "Run userspace link emulators (UDP relays) from a YAML file",
		Long: `Runs the UDP relays described in a YAML file until interrupted. Each relay
listens on an address, relays every client's datagrams to one upstream address
through its own socket, and applies an emulated link per direction: delay,
jitter, loss (Bernoulli, Gilbert-Elliott), rate limits with drop-tail queues,
Mahimahi, Starlink and 5Gophers traces, scheduled outages, or a built-in model
(model: cellular/att, leo/starlink, ...). Stats are printed every few seconds
and on exit. See docs/emu.md for the file format.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgPath == "" {
				return errors.New("emu: --config FILE is required")
			}
			cfg, err := emuconfig.Load(cfgPath)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if check {
				for _, r := range cfg.Relays {
					fmt.Fprintf(out, "%s: %s -> %s, seed %d\n", r.Name, r.Listen, r.Upstream, r.Seed)
				}
				return nil
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return emuconfig.Run(ctx, cfg, out, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "YAML file describing the relays (see docs/emu.md)")
	f.BoolVar(&check, "check", false, "load and check the file, print the relays, and exit")
	f.BoolVar(&verbose, "verbose", false, "log at debug level")
	return cmd
}
