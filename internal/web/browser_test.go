package web

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/bondd/bondd/emu"
	"github.com/bondd/bondd/internal/demo"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/usage"
	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel"
)

// screenshots is where TestBrowser saves its screenshots: a temporary
// directory, or docs/ to update the ones docs/operations.md shows:
//
//	go test ./internal/web -run TestBrowser -args -screenshots ../../docs
var screenshots = flag.String("screenshots", "", "directory for the browser test's screenshots (default: a temporary one)")

// findChromium returns the path of a Chromium or Chrome binary, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserLog collects what the page must not produce: console errors,
// uncaught exceptions, failed requests and error responses.
type browserLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *browserLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, s)
}

func (l *browserLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// watch collects, until ctx ends, the console errors and exceptions of
// the page, failed requests and responses of status 400 or more.
func (l *browserLog) watch(ctx context.Context) {
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				l.add("console: " + m.String())
			}
		}
	}()
	go func() {
		for e, err := range chromedp.Events(ctx, network.LoadingFailed) {
			if err != nil {
				return
			}
			if !e.Canceled {
				l.add("request failed: " + e.ErrorText)
			}
		}
	}()
	go func() {
		for e, err := range chromedp.Events(ctx, network.ResponseReceived) {
			if err != nil {
				return
			}
			if e.Response.Status >= 400 {
				l.add(fmt.Sprintf("response %d %s", e.Response.Status, e.Response.URL))
			}
		}
	}()
}

// card is what the browser shows of one uplink.
type card struct {
	Path   string   `json:"path"`
	State  string   `json:"state"`
	Reason string   `json:"reason"` // the status reason in brackets ("(silent)", "(loss)"), or empty
	Nums   []string `json:"nums"`
}

const readCards = `JSON.stringify([...document.querySelectorAll('.card')].map(c => ({path: c.dataset.path,
  state: c.querySelector('.badge').textContent, reason: c.querySelector('.reason').textContent,
  nums: [...c.querySelectorAll('.num')].map(n => n.textContent)})))`

func cards(t *testing.T, ctx context.Context) []card {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](readCards))
	if err != nil {
		t.Fatalf("reading the cards: %v", err)
	}
	var cs []card
	if err := json.Unmarshal([]byte(s), &cs); err != nil {
		t.Fatalf("cards %q: %v", s, err)
	}
	return cs
}

// TestBrowser drives Chromium against the page of an in-process bond over
// three emulated cellular paths with traffic: the page loads without a
// console error or failed request, every uplink has a card whose numbers
// move, a blackholed path's card turns SUSPECT, DOWN or DEGRADED (silent)
// within 2 s, and the concentrator's table lists the edge and opens its
// page.
func TestBrowser(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("no chromium on PATH: install it (apt-get install chromium) to run the browser test")
	}
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	sc, err := emu.CellularScenario("", 1)
	if err != nil {
		t.Fatal(err)
	}
	picker, _ := policy.NewPicker(policy.SchedulerDefault)
	set, err := rules.CompileBytes("vehicular.yaml", []byte(testRules), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bed, err := demo.NewBed(demo.BedOptions{Scenario: sc, Seed: 1, FEC: tunnel.FECOptions{Mode: tunnel.FECAdaptive}, Picker: picker,
		Rules: staticRules{set}}, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer bed.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := demo.WaitPaths(ctx, bed.Edge, len(sc.Paths)); err != nil {
		t.Fatal(err)
	}
	flowCtx, stopFlow := context.WithCancel(ctx)
	var flow sync.WaitGroup
	flow.Add(2)
	go func() { defer flow.Done(); bed.Recv(flowCtx, func([]byte, time.Time) {}) }()
	go func() { defer flow.Done(); sendFlow(flowCtx, bed) }()
	defer func() { stopFlow(); flow.Wait() }()

	started := time.Now()
	var ruleStatus atomic.Pointer[status.Rules]
	ruleStatus.Store(&status.Rules{File: "/etc/bondd/vehicular.yaml", Version: 1, Loaded: started, Rules: set.Len()})
	edgeSrc := func() status.Report {
		return status.Report{Role: "edge", Version: "test", Uptime: time.Since(started), Rules: ruleStatus.Load(), Usage: testUsage,
			Bonds: []status.Bond{{BondStats: bed.Edge.Stats(), Addresses: []netip.Prefix{netip.PrefixFrom(demo.EdgeAddr, 32)}}}}
	}
	srv, err := Start(Options{Listen: "127.0.0.1:0", Source: edgeSrc})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The concentrator's view of the same bond, started with the edge's so
	// that its sparklines have the same history.
	concSrc := func() status.Report {
		return status.Report{Role: "concentrator", Version: "test", Uptime: time.Since(started),
			Bonds: []status.Bond{{BondStats: bed.Conc.Stats(), Addresses: []netip.Prefix{netip.PrefixFrom(demo.EdgeAddr, 32)}}}}
	}
	csrv, err := Start(Options{Listen: "127.0.0.1:0", Source: concSrc})
	if err != nil {
		t.Fatal(err)
	}
	defer csrv.Close()

	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	bctx, blog := startBrowser(t, ctx, chrome)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL())); err != nil {
		t.Fatalf("loading %s: %v", srv.URL(), err)
	}
	waitFor(t, "a card per uplink", 15*time.Second, func() bool { return len(cards(t, bctx)) == len(sc.Paths) })
	waitFor(t, "the budget's projection on verizon's card", 5*time.Second, func() bool {
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('.card[data-path="verizon"]').textContent`))
		return err == nil && strings.Contains(text, "25.4 GB") && strings.Contains(text, "projected")
	})
	first := cards(t, bctx)
	for _, p := range sc.Paths {
		if !slices.ContainsFunc(first, func(c card) bool { return c.Path == p.Name }) {
			t.Errorf("no card for uplink %s: %+v", p.Name, first)
		}
	}
	// Every card moves under traffic: within 8 s, as the scheduler may
	// leave one uplink without data for a few seconds (its RTT the
	// highest); its card then moves once it carries some again.
	changed := make([]bool, len(first))
	var last []card
	for end := time.Now().Add(8 * time.Second); ; {
		time.Sleep(500 * time.Millisecond)
		last = cards(t, bctx)
		all := true
		for i, c := range last {
			if i < len(first) && !slices.Equal(c.Nums, first[i].Nums) {
				changed[i] = true
			}
			all = all && (i >= len(changed) || changed[i])
		}
		if all || time.Now().After(end) {
			break
		}
	}
	for i, c := range last {
		if i < len(changed) && !changed[i] {
			t.Errorf("card %s did not change in 8 s under traffic: %q", c.Path, c.Nums)
		}
	}
	time.Sleep(8 * time.Second) // some chart for the screenshot

	// Blackhole the first path: its card turns SUSPECT or DOWN in 2 s, or
	// DEGRADED (silent) when nothing was sent on it for SUSPECT to catch
	// (nothing heard for 1.5 s; under load the page can see that first).
	victim := sc.Paths[0].Name
	wasSilent := slices.ContainsFunc(cards(t, bctx), func(c card) bool { return c.Path == victim && c.Reason == "(silent)" })
	bed.Relays[0].SetDown(true)
	down := time.Now()
	var seen, why string
	caught := func() bool {
		return seen == "SUSPECT" || seen == "DOWN" || !wasSilent && seen == "DEGRADED" && why == "(silent)"
	}
	for time.Since(down) < 2*time.Second {
		for _, c := range cards(t, bctx) {
			if c.Path == victim {
				seen, why = c.State, c.Reason
			}
		}
		if caught() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !caught() {
		t.Errorf("blackholed path %s: card shows %q %q after %v, want SUSPECT, DOWN or DEGRADED (silent)", victim, seen, why, time.Since(down).Round(time.Millisecond))
	} else {
		t.Logf("blackholed path %s: card %s after %v", victim, seen, time.Since(down).Round(time.Millisecond))
	}
	// A rule file edit that fails: the event says why.
	ruleStatus.Store(&status.Rules{File: "/etc/bondd/vehicular.yaml", Version: 1, Loaded: started, Rules: set.Len(), Reloads: 1, ReloadFailures: 1,
		LastError: `/etc/bondd/vehicular.yaml:9: unknown action "fec_ratio"; did you mean "fec"?`})
	waitFor(t, "the rejected reload in the events", 3*time.Second, func() bool {
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('events').textContent`))
		return err == nil && strings.Contains(text, `unknown action "fec_ratio"`)
	})
	shot(t, bctx, filepath.Join(dir, "web-edge.png"))
	bed.Relays[0].SetDown(false)

	// The concentrator's table: a row that opens the edge's page.

	if err := chromedp.Do(bctx, chromedp.Navigate(csrv.URL()), chromedp.WaitVisible(chromedp.CSS("#edges tbody tr a"))); err != nil {
		t.Fatalf("concentrator page: %v", err)
	}
	time.Sleep(2 * time.Second)
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#edges tbody tr').length`))
	if err != nil {
		t.Fatal(err)
	}
	sparks, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#edges canvas.spark').length`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1 || sparks != len(sc.Paths) {
		t.Errorf("concentrator table: %d rows, %d sparklines; want 1 and %d", rows, sparks, len(sc.Paths))
	}
	shot(t, bctx, filepath.Join(dir, "web-concentrator.png"))
	// The live table is drawn again with each update: the node the click's
	// query found can be gone when the click reaches it ("Could not find
	// node with given id"). Try again on a fresh query.
	for try := 1; ; try++ {
		err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#edges tbody tr a"), chromedp.NodeVisible))
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("clicking the edge's row, %d tries: %v", try, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, "the edge's cards on the concentrator", 10*time.Second, func() bool { return len(cards(t, bctx)) == len(sc.Paths) })
	if errs := blog.list(); len(errs) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(errs, "\n"))
	}
}

// testRules is the browser test's rule file: the flow's packets and the
// rest, so that the rules table has counts.
const testRules = `
rules:
  - id: udp-flow
    priority: 10
    match: {proto: udp}
    actions: {priority: 5}
  - id: everything-else
    priority: 0
    actions: {priority: 1}
`

// testUsage is a budget on one path, as the usage store reports it: the
// page shows its use and projection on that path's card.
var testUsage = &status.Usage{File: "/var/lib/bondd/usage.db", Paths: []usage.PathUsage{{Bond: "demo-edge", Path: "verizon",
	PeriodStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	Budget: "20GB/month", BudgetBytes: 20e9, Direction: "both", UsedBytes: 4.1e9, Share: 0.205, ProjectedBytes: 25.4e9, ProjectedShare: 1.27}}}

// staticRules is a rule source that never reloads.
type staticRules struct{ set *rules.Set }

// Current returns the set.
func (s staticRules) Current() *rules.Set { return s.set }

// startBrowser starts Chromium for the test, closed at its end, and
// watches its errors.
func startBrowser(t *testing.T, ctx context.Context, chrome string) (context.Context, *browserLog) {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1200))...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil { // start the browser
		t.Fatalf("starting %s: %v", chrome, err)
	}
	blog := &browserLog{}
	blog.watch(bctx)
	return bctx, blog
}

// TestBrowserFleet1000 opens a concentrator's page with 1,000 edges: one
// page of 50 rows, sorting by rate puts the busiest edge first, and the
// filter narrows the table, with no console error or failed request.
func TestBrowserFleet1000(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("no chromium on PATH: install it (apt-get install chromium) to run the browser test")
	}
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	s := startFake(t, Options{}, &fakeSource{role: "concentrator", edges: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bctx, blog := startBrowser(t, ctx, chrome)
	if err := chromedp.Do(bctx, chromedp.Navigate(s.URL())); err != nil {
		t.Fatal(err)
	}
	rows := func() []string {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#edges tbody tr a')].map(a => a.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor(t, "50 rows", 10*time.Second, func() bool { return len(rows()) == 50 })
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#sorts button[data-sort="rate"]`), chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	// The fake's busiest edge is the last: its paths carry the most.
	waitFor(t, "edge-0999 first when sorted by rate", 10*time.Second, func() bool { r := rows(); return len(r) > 0 && r[0] == "edge-0999" })
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#filter"), "edge-012")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the 10 edges matching edge-012", 10*time.Second, func() bool { return len(rows()) == 10 })
	if errs := blog.list(); len(errs) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(errs, "\n"))
	}
}

// sendFlow sends about 2 Mbit/s of 1200-byte UDP packets into the edge
// until ctx is done.
func sendFlow(ctx context.Context, bed *demo.Bed) {
	payload := make([]byte, 1172)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for range 2 {
				bed.Send(payload)
			}
		}
	}
}

// shot saves a full-page PNG screenshot.
func shot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// waitFor polls cond every 100 ms for up to d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
