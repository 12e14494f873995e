package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bondd/bondd/internal/testbed"
	"github.com/bondd/bondd/internal/testkit"
)

// metricsAddr is where both daemons of TestNetnsMetrics serve metrics, each
// on the loopback of its own namespace.
const metricsAddr = "127.0.0.1:9477"

// TestNetnsMetrics runs the real binary with metrics_listen and qlog_dir
// set, sends traffic through the bond, and checks /metrics of both ends
// against the traffic and against bondd status, and that each end wrote a
// qlog file per path connection.
func TestNetnsMetrics(t *testing.T) {
	requireNetns(t)
	b := newITBed(t)
	pin := b.writeCreds(t)
	edgeQlog, concQlog := filepath.Join(b.dir, "qlog-edge"), filepath.Join(b.dir, "qlog-conc")
	extra := func(qlogDir string) string {
		return fmt.Sprintf("metrics_listen: %s\nqlog_dir: %s\n", metricsAddr, qlogDir)
	}
	b.start(t, b.conc, "concentrator", b.concConfig()+extra(concQlog), b.concSock)
	getStatus(t, b.concSock)
	b.start(t, b.edge, "edge", b.edgeConfig("bondd0", `10.77.0.2/24`, "van.token", pin)+extra(edgeQlog), b.edgeSock)
	testkit.WaitFor(t, "three active edge paths", 15*time.Second, func() bool { return activePaths(getStatus(t, b.edgeSock)) == 3 })

	const echoes = 5
	for range echoes {
		udpEcho(t, b.edge, b.conc, "10.77.0.2:40000", "10.78.0.1:7")
	}

	// A path's QUIC metrics reach its state with the first update after
	// its hello (the recorder ignores the handshake's): keepalives bring
	// one within a second.
	var em metrics
	testkit.WaitFor(t, "RTT samples on every edge path", 10*time.Second, func() bool {
		em = scrape(t, b.edge)
		for i := range 3 {
			if em[fmt.Sprintf(`bondd_path_smoothed_rtt_seconds{edge="van-1",path="up%d"}`, i)] == 0 {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		p := fmt.Sprintf(`edge="van-1",path="up%d"`, i)
		if v := em.get(t, `bondd_path_status{`+p+`,status="ACTIVE"}`); v != 1 {
			t.Errorf("edge path up%d: ACTIVE = %v, want 1", i, v)
		}
		if v := em.get(t, `bondd_path_smoothed_rtt_seconds{`+p+`}`); v <= 0 || v > 1 {
			t.Errorf("edge path up%d: srtt %v s, want between 0 and 1 s on veth", i, v)
		}
		if v := em.get(t, `bondd_path_congestion_window_bytes{`+p+`}`); v < 1200 {
			t.Errorf("edge path up%d: cwnd %v bytes", i, v)
		}
		if v := em.get(t, `bondd_path_quic_sent_packets_total{`+p+`}`); v == 0 {
			t.Errorf("edge path up%d: no QUIC packets sent", i)
		}
		if v := em.get(t, `bondd_path_label_info{edge="van-1",key="link_type",path="up`+strconv.Itoa(i)+`",value="cellular"}`); v != 1 {
			t.Errorf("edge path up%d: label link_type=cellular = %v", i, v)
		}
	}
	var sent float64
	for i := range 3 {
		sent += em.get(t, fmt.Sprintf(`bondd_path_sent_packets_total{edge="van-1",path="up%d"}`, i))
	}
	if sent < echoes {
		t.Errorf("edge paths sent %v datagrams, want at least %d (one per echo)", sent, echoes)
	}
	if v := em.get(t, `bondd_bond_sent_packets_total{edge="van-1"}`); v < echoes {
		t.Errorf("edge bond sent %v packets, want at least %d", v, echoes)
	}
	if v := em.get(t, `bondd_rule_hits_total{edge="van-1",rule="echo-no-fec"}`); v < echoes {
		t.Errorf("rule echo-no-fec hit %v times, want at least %d", v, echoes)
	}
	if v := em.get(t, `bondd_rules_version`); v != 1 {
		t.Errorf("rules version %v, want 1", v)
	}
	if v := em.get(t, `bondd_info{role="edge",version="`+getStatus(t, b.edgeSock).Version+`"}`); v != 1 {
		t.Errorf("bondd_info = %v", v)
	}

	// Counters never fall behind bondd status read after the scrape.
	st := getStatus(t, b.edgeSock)
	if got, want := em.get(t, `bondd_bond_sent_packets_total{edge="van-1"}`), float64(st.Bonds[0].TxPackets); got > want {
		t.Errorf("metrics say %v packets sent, a later status %v", got, want)
	}

	cm := scrape(t, b.conc)
	if v := cm.get(t, `bondd_bond_received_packets_total{edge="van-1"}`); v < echoes {
		t.Errorf("concentrator delivered %v packets, want at least %d", v, echoes)
	}
	if v := cm.get(t, `bondd_auth_failures_total`); v != 0 {
		t.Errorf("auth failures %v", v)
	}
	if _, ok := cm[`bondd_path_status{edge="van-1",path="up0",status="ACTIVE"}`]; !ok {
		t.Error("the concentrator exports no status for path up0")
	}

	// qlog: one file per path connection at each end, paired by name.
	for _, side := range []struct{ dir, suffix string }{{edgeQlog, "_client.sqlog"}, {concQlog, "_server.sqlog"}} {
		m, _ := filepath.Glob(filepath.Join(side.dir, "*"+side.suffix))
		if len(m) < 3 {
			t.Errorf("%s: %d qlog files, want one per path connection (3)", side.dir, len(m))
		}
	}
	cm2, _ := filepath.Glob(filepath.Join(edgeQlog, "*_client.sqlog"))
	for _, f := range cm2 {
		odcid := strings.TrimSuffix(filepath.Base(f), "_client.sqlog")
		if m, _ := filepath.Glob(filepath.Join(concQlog, odcid+"_server.sqlog")); len(m) != 1 {
			t.Errorf("edge qlog %s has no concentrator counterpart", filepath.Base(f))
		}
	}
}

// metrics maps each series, as written in the exposition, to its value.
type metrics map[string]float64

func (m metrics) get(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := m[series]
	if !ok {
		t.Errorf("no series %s", series)
	}
	return v
}

// scrape reads metricsAddr/metrics from inside ns.
func scrape(t *testing.T, ns *testbed.NS) metrics {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return ns.DialTCP(ctx, addr) },
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", ns, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s\n%s", ns, resp.Status, body)
	}
	m := make(metrics)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: bad line %q", ns, line)
		}
		m[line[:i]] = v
	}
	return m
}
