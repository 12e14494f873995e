package fleet

// The speaker as a separate process for the netns tests: GoBGP opens its
// sockets on goroutines of its own, which would not run inside a namespace
// entered by testbed.NS.Do, so each node is the test binary re-run under
// `ip netns exec` with TestMain handing control to runHelper. It also lets
// a test stop (SIGSTOP) or kill (SIGKILL) a node like a real one.
//
// Protocol, one line each way: "announce EDGE P1,P2", "withdraw EDGE",
// "stats", "stop graceful|abrupt" on stdin; a JSON helperReply on stdout.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"
)

const helperEnv = "BONDD_FLEET_HELPER"

type helperReply struct {
	Err      string `json:",omitempty"`
	Stats    Stats
	RIBPaths int // after "rib": paths in the node's global RIB
}

func runHelper(cfgJSON string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper config:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var err error
		rib := 0
		switch {
		case len(f) == 3 && f[0] == "announce":
			var ps []netip.Prefix
			for _, p := range strings.Split(f[2], ",") {
				pp, perr := netip.ParsePrefix(p)
				if perr != nil {
					err = perr
					break
				}
				ps = append(ps, pp)
			}
			if err == nil {
				err = s.Announce(f[1], ps)
			}
		case len(f) == 2 && f[0] == "withdraw":
			err = s.Withdraw(f[1])
		case len(f) == 1 && f[0] == "stats":
		case len(f) == 1 && f[0] == "rib":
			rib, err = s.ribPaths()
		case len(f) == 2 && f[0] == "stop":
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = s.Stop(ctx, f[1] == "graceful")
			cancel()
		default:
			err = fmt.Errorf("helper: bad command %q", in.Text())
		}
		r := helperReply{Stats: s.Stats(), RIBPaths: rib}
		if err != nil {
			r.Err = err.Error()
		}
		out.Encode(r)
		if len(f) > 0 && f[0] == "stop" {
			return 0
		}
	}
	return 0
}
