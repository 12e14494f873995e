package web

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/internal/usage"
	"github.com/bondd/bondd/tunnel"
)

// fakeSource is a status source whose counters advance at each call:
// n edges (concentrator) or one (edge), three paths each.
type fakeSource struct {
	mu    sync.Mutex
	role  string
	edges int
	calls uint64
	down  map[string]bool // path names reported UNAVAILABLE
	rules *status.Rules
	usage *status.Usage
}

func (f *fakeSource) report() status.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	r := status.Report{Role: f.role, Version: "test", Uptime: time.Duration(f.calls) * time.Second, Rules: f.rules, Usage: f.usage}
	for e := range f.edges {
		b := status.Bond{BondStats: tunnel.BondStats{EdgeID: fmt.Sprintf("edge-%04d", e), MTU: 1280, MTUConfigured: 1280,
			TxPackets: f.calls * 100, RxPackets: f.calls * 90, Drops: tunnel.DropCounts{},
			FEC: &tunnel.FECStats{Mode: "adaptive", CodingRate: 0.9, ParitySent: f.calls * 10, Recovered: f.calls, Lost: f.calls * uint64(e%3)}},
			Addresses: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", e/256, e%256))}}
		for i, name := range []string{"att", "tmobile", "verizon"} {
			st := "ACTIVE"
			if f.down[name] {
				st = "UNAVAILABLE"
			}
			k := uint64(e*3 + i + 1)
			b.Paths = append(b.Paths, tunnel.PathStats{Name: name, Status: st, SmoothedRTT: time.Duration(40+i) * time.Millisecond,
				TxBytes: f.calls * k * 100_000, RxBytes: f.calls * k * 90_000, PacketsSent: f.calls * 100, PacketsLost: f.calls * k % 7,
				CapacityBps: k * 1_000_000, DatagramBudget: 1322, Drops: tunnel.DropCounts{}})
		}
		r.Bonds = append(r.Bonds, b)
	}
	return r
}

func (f *fakeSource) setDown(name string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[string]bool{}
	}
	f.down[name] = down
}

func startFake(t testing.TB, o Options, src *fakeSource) *Server {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	o.Source = src.report
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp
}

// TestRefusesUnsafeListen: a listener that is not loopback starts only
// with a token.
func TestRefusesUnsafeListen(t *testing.T) {
	src := &fakeSource{role: "edge", edges: 1}
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		s, err := Start(Options{Listen: addr, Source: src.report})
		if !errors.Is(err, ErrNotSafe) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Start on %s without a token: %v, want ErrNotSafe", addr, err)
		} else if !strings.Contains(err.Error(), "web.token_file") {
			t.Errorf("the refusal does not say what to set: %v", err)
		}
	}
	s, err := Start(Options{Listen: "0.0.0.0:0", Source: src.report, Token: []byte("0123456789abcdef0123")})
	if err != nil {
		t.Fatalf("with a token: %v", err)
	}
	s.Close()
	if _, err := Start(Options{Listen: "127.0.0.1:0"}); err == nil {
		t.Error("Start without a source succeeded")
	}
}

// TestToken: without the token every route answers 401; with it, as a
// bearer token, a query parameter (which sets a cookie and redirects) or
// the cookie, 200.
func TestToken(t *testing.T) {
	testkit.CheckLeaks(t)
	const tok = "0123456789abcdef0123"
	s := startFake(t, Options{Token: []byte(tok)}, &fakeSource{role: "edge", edges: 1})
	base := s.URL()
	for _, p := range []string{"", "app.js", "style.css", "api/status", "api/stream"} {
		if r := get(t, base+p, nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without the token: %d, want 401", p, r.StatusCode)
		}
		if r := get(t, base+p, map[string]string{"Authorization": "Bearer wrong-token-wrong-token"}); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s with a wrong token: %d, want 401", p, r.StatusCode)
		}
	}
	if r := get(t, base+"api/status", map[string]string{"Authorization": "Bearer " + tok}); r.StatusCode != http.StatusOK {
		t.Errorf("bearer token: %d", r.StatusCode)
	}
	r := get(t, base+"?token="+tok, nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Errorf("?token=: %d to %q, want 303 to /", r.StatusCode, r.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("?token= set no HttpOnly, SameSite=Strict cookie: %+v", r.Cookies())
	}
	if r := get(t, base+"app.js", map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}); r.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %d", r.StatusCode)
	}
}

// TestHeaders: the security headers, GET only, no caching of data, and
// a Host that is a name refused on a page without a token.
func TestHeaders(t *testing.T) {
	testkit.CheckLeaks(t)
	s := startFake(t, Options{}, &fakeSource{role: "edge", edges: 1})
	r := get(t, s.URL(), nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d", r.StatusCode)
	}
	csp := r.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows inline script or eval: %q", csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options: nosniff")
	}
	if r := get(t, s.URL()+"api/status", nil); r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("api/status Cache-Control %q, want no-store", r.Header.Get("Cache-Control"))
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, s.URL()+"api/status", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL(), nil)
	req.Host = "rebound.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host rebound.example.com: %d, want 403", resp.StatusCode)
	}
	if r := get(t, s.URL()+"api/stream?view=nope", nil); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad query: %d, want 400", r.StatusCode)
	}
}

// TestPageSize: HTML, CSS and JavaScript together stay within 150 KB.
func TestPageSize(t *testing.T) {
	const limit = 150 * 1000
	if n := PageBytes(); n > limit || n == 0 {
		t.Errorf("the page is %d bytes; the limit is %d", n, limit)
	} else {
		t.Logf("the page is %d bytes", n)
	}
}

// readEvents reads SSE messages from url into ch until the body ends.
func readEvents(ctx context.Context, url string, ch chan<- map[string]any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return err
		}
		select {
		case ch <- m:
		case <-ctx.Done():
			return nil
		}
	}
	return sc.Err()
}

func next(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no stream message in 5 s")
		return nil
	}
}

// TestStreamEdge: the edge view's first message has the history, later
// ones the current values; a path going down is an event.
func TestStreamEdge(t *testing.T) {
	testkit.CheckLeaks(t)
	src := &fakeSource{role: "edge", edges: 1, rules: &status.Rules{File: "r.yaml", Version: 1, Rules: 2},
		usage: &status.Usage{Paths: []usage.PathUsage{{Bond: "edge-0000", Path: "att", Budget: "20GB/month", BudgetBytes: 20e9,
			UsedBytes: 5e9, Share: 0.25, ProjectedBytes: 24e9, ProjectedShare: 1.2}}}}
	s := startFake(t, Options{Interval: 50 * time.Millisecond}, src)
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan map[string]any)
	go readEvents(ctx, s.URL()+"api/stream", ch)
	m := next(t, ch)
	if m["kind"] != "edge" || m["edge"] != "edge-0000" {
		t.Fatalf("first message: kind %v edge %v", m["kind"], m["edge"])
	}
	hist, _ := m["hist"].(map[string]any)
	if hist == nil || hist["len"].(float64) < 2 {
		t.Fatalf("first message without history: %v", m["hist"])
	}
	m = next(t, ch)
	if m["hist"] != nil {
		t.Error("a later message carries the history again")
	}
	paths := m["paths"].([]any)
	if len(paths) != 3 {
		t.Fatalf("%d paths", len(paths))
	}
	if p := paths[0].(map[string]any); p["sent_bps"].(float64) <= 0 || p["state"] != "ACTIVE" {
		t.Errorf("path 0: %v", p)
	}
	if u, _ := paths[0].(map[string]any)["usage"].(map[string]any); u == nil || u["projected_bytes"].(float64) != 24e9 {
		t.Errorf("path att's usage: %v, want its budget projection", u)
	}
	if u := paths[1].(map[string]any)["usage"]; u != nil {
		t.Errorf("path tmobile has usage %v; the report has none for it", u)
	}
	src.setDown("tmobile", true)
	src.mu.Lock()
	src.rules = &status.Rules{File: "r.yaml", Version: 1, Rules: 2, Reloads: 1, ReloadFailures: 1, LastError: "r.yaml:3: unknown action"}
	src.mu.Unlock()
	deadline := time.Now().Add(3 * time.Second)
	var sawDown, sawReject bool
	for time.Now().Before(deadline) && !(sawDown && sawReject) {
		m = next(t, ch)
		for _, e := range m["events"].([]any) {
			ev := e.(map[string]any)
			sawDown = sawDown || ev["path"] == "tmobile" && strings.Contains(ev["text"].(string), "→ DOWN")
			sawReject = sawReject || strings.Contains(ev["text"].(string), "r.yaml:3: unknown action")
		}
	}
	if !sawDown || !sawReject {
		t.Errorf("events: path down %v, rejected reload %v; last %v", sawDown, sawReject, m["events"])
	}
}

// TestStreamFleet: a concentrator with 1,000 edges streams one page of the
// table, sorted and filtered as asked.
func TestStreamFleet(t *testing.T) {
	testkit.CheckLeaks(t)
	s := startFake(t, Options{Interval: 50 * time.Millisecond}, &fakeSource{role: "concentrator", edges: 1000})
	time.Sleep(150 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan map[string]any)
	go readEvents(ctx, s.URL()+"api/stream?sort=rate&desc=1&size=20&page=1", ch)
	m := next(t, ch)
	m = next(t, ch)
	if m["kind"] != "fleet" || m["total"].(float64) != 1000 || m["matched"].(float64) != 1000 {
		t.Fatalf("kind %v total %v matched %v", m["kind"], m["total"], m["matched"])
	}
	rows := m["rows"].([]any)
	if len(rows) != 20 {
		t.Fatalf("%d rows, want 20", len(rows))
	}
	prev := 1e18
	for _, r := range rows {
		row := r.(map[string]any)
		rate := row["in_bps"].(float64) + row["out_bps"].(float64)
		if rate > prev {
			t.Errorf("rows not sorted by rate, descending: %v after %v", rate, prev)
		}
		prev = rate
		if n := len(row["paths"].([]any)[0].(map[string]any)["spark"].([]any)); n != sparkLen {
			t.Errorf("sparkline of %d points", n)
		}
	}
	// Page 1 of the descending order: edges 979 to 960.
	if first := rows[0].(map[string]any)["edge"]; first != "edge-0979" {
		t.Errorf("first row of page 1 is %v, want edge-0979", first)
	}
	cancel()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch2 := make(chan map[string]any)
	go readEvents(ctx2, s.URL()+"api/stream?view=fleet&q=edge-012", ch2)
	m = next(t, ch2)
	if m["matched"].(float64) != 10 || len(m["rows"].([]any)) != 10 {
		t.Errorf("filter edge-012: matched %v, %d rows; want 10", m["matched"], len(m["rows"].([]any)))
	}
}

// TestMaxViewers: the 33rd stream is refused with 503.
func TestMaxViewers(t *testing.T) {
	testkit.CheckLeaks(t)
	s := startFake(t, Options{}, &fakeSource{role: "edge", edges: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range MaxViewers {
		ch := make(chan map[string]any, 4)
		wg.Add(1)
		go func() { defer wg.Done(); readEvents(ctx, s.URL()+"api/stream", ch) }()
		next(t, ch)
	}
	if n := s.Viewers(); n != MaxViewers {
		t.Fatalf("%d viewers, want %d", n, MaxViewers)
	}
	if r := get(t, s.URL()+"api/stream", nil); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("viewer %d: %d, want 503", MaxViewers+1, r.StatusCode)
	}
}

// TestParseQuery rejects what it does not know.
func TestParseQuery(t *testing.T) {
	for _, bad := range []string{"view=x", "sort=x", "page=-1", "size=0", "size=201", "page=x", "q=" + strings.Repeat("a", 65)} {
		v, _ := url.ParseQuery(bad)
		if _, err := parseQuery(v); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	v, _ := url.ParseQuery("view=fleet&sort=loss&desc=1&page=3&size=10&q=van")
	q, err := parseQuery(v)
	if err != nil || q.view != "fleet" || q.sort != "loss" || !q.desc || q.page != 3 || q.size != 10 || q.q != "van" {
		t.Errorf("parseQuery = %+v, %v", q, err)
	}
}

// TestSlowReaderDropped: a viewer that stops reading is dropped once a
// write waits longer than the write timeout, and nothing piles up.
func TestSlowReaderDropped(t *testing.T) {
	testkit.CheckLeaks(t)
	old := writeTimeout
	writeTimeout = 300 * time.Millisecond
	defer func() { writeTimeout = old }()
	s := startFake(t, Options{Interval: 20 * time.Millisecond}, &fakeSource{role: "concentrator", edges: 1000})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /api/stream?size=200 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	testkit.WaitFor(t, "the viewer to start", 2*time.Second, func() bool { return s.Viewers() == 1 })
	testkit.WaitFor(t, "the slow viewer to be dropped", 20*time.Second, func() bool { return s.Viewers() == 0 })
}

// TestCheckSafe: TLS that requires client certificates makes any listener
// acceptable; TLS without them does not.
func TestCheckSafe(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		safe bool
	}{
		{Options{Listen: "127.0.0.1:1"}, true},
		{Options{Listen: "localhost:1"}, true},
		{Options{Listen: "0.0.0.0:1"}, false},
		{Options{Listen: "0.0.0.0:1", Token: []byte("0123456789abcdef")}, true},
		{Options{Listen: "0.0.0.0:1", TLS: &tls.Config{}}, false},
		{Options{Listen: "0.0.0.0:1", TLS: &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}}, true},
	} {
		if err := checkSafe(tc.o); (err == nil) != tc.safe {
			t.Errorf("%s, token %v, TLS %v: %v", tc.o.Listen, tc.o.Token != nil, tc.o.TLS != nil, err)
		}
	}
}
