package tunnel

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/internal/testkit"
	"github.com/bondd/bondd/policy"
)

// TestQlogDir opens one connection with PathOptions.QlogDir set on both
// ends, the server's recorder coming from the connection context as on the
// concentrator: each end writes its qlog file, both named by the same
// original destination connection ID, and the recorders still see the
// connection's events.
func TestQlogDir(t *testing.T) {
	testkit.CheckLeaks(t)
	dir := t.TempDir()
	opts := PathOptions{QlogDir: dir}.withDefaults()

	cert, pin, err := SelfSignedCert("qlog.test")
	if err != nil {
		t.Fatal(err)
	}
	spc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spc.Close()
	srvRec, srvPath, _ := newTestRecorder("srv")
	str := &quic.Transport{
		Conn: spc,
		ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			return context.WithValue(ctx, recorderKey{}, srvRec), nil
		},
	}
	defer str.Close()
	ln, err := str.Listen(ServerTLS(cert, nil), quicConfig(opts, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cpc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cpc.Close()
	ctr := &quic.Transport{Conn: cpc}
	defer ctr.Close()
	cliRec, cliPath, cliConn := newTestRecorder("cli")
	ctls, err := ClientTLS("qlog.test", nil, pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan *quic.Conn, 1)
	go func() {
		c, err := ln.Accept(context.Background())
		if err == nil {
			accepted <- c
		}
	}()
	cc, err := ctr.Dial(context.Background(), spc.LocalAddr(), ctls, quicConfig(opts, cliRec))
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if err := cc.SendDatagram([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ReceiveDatagram(context.Background()); err != nil {
		t.Fatal(err)
	}
	cc.CloseWithError(0, "done")
	<-sc.Context().Done()
	sc.CloseWithError(0, "")

	// The recorders are unchanged by the fan-out.
	if cliPath.PacketsSent() == 0 || srvPath.PacketsSent() == 0 {
		t.Errorf("recorders saw %d (client) and %d (server) packets sent, want both > 0", cliPath.PacketsSent(), srvPath.PacketsSent())
	}
	if cliConn.srtt.Load() == 0 {
		t.Error("client recorder saw no RTT metrics")
	}

	// Both files exist once the connections are closed (the writer flushes
	// on the producer's Close).
	var odcid [2]string
	for i, side := range []string{"client", "server"} {
		waitFor(t, func() bool {
			m, _ := filepath.Glob(filepath.Join(dir, "*_"+side+".sqlog"))
			return len(m) == 1
		})
		m, _ := filepath.Glob(filepath.Join(dir, "*_"+side+".sqlog"))
		odcid[i] = strings.TrimSuffix(filepath.Base(m[0]), "_"+side+".sqlog")
		var data []byte
		waitFor(t, func() bool {
			data, _ = os.ReadFile(m[0])
			return bytes.Contains(data, []byte(`"transport:connection_closed"`))
		})
		if data[0] != 0x1e {
			t.Errorf("%s: does not start with a JSON-SEQ record separator", m[0])
		}
		for _, want := range []string{`"vantage_point":{"type":"` + side + `"}`, `"transport:packet_sent"`, `"transport:packet_received"`} {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("%s: no %s", m[0], want)
			}
		}
	}
	if odcid[0] != odcid[1] {
		t.Errorf("client file named by %s, server file by %s; want the same original destination connection ID", odcid[0], odcid[1])
	}
}

// TestQlogDirBond runs a bond whose edge writes qlog: the paths come up as
// without it, and each uplink connection leaves a client file.
func TestQlogDirBond(t *testing.T) {
	testkit.CheckLeaks(t)
	dir := t.TempDir()
	tb := newTestBondWith(t, token, 2, func(o *EdgeOptions) { o.Paths.QlogDir = dir })
	tb.waitActive(t, 2)
	tb.exchange(t, tb.edgeDev, tb.concDev, edgeAddr, srvAddr, 20)
	// The recorder still feeds every path's state (keepalives alone send).
	waitFor(t, func() bool {
		for _, p := range tb.edge.Bond().Stats().Paths {
			if p.SmoothedRTT == 0 || p.PacketsSent == 0 {
				return false
			}
		}
		return true
	})
	m, err := filepath.Glob(filepath.Join(dir, "*_client.sqlog"))
	if err != nil || len(m) < 2 {
		t.Fatalf("qlog files %v (%v), want one per uplink connection", m, err)
	}
}

// newTestRecorder returns a recorder feeding the connection slot of a new
// path outside any bond's path set, the path's policy state and the slot.
func newTestRecorder(name string) (*recorder, *policy.Path, *pathConn) {
	p := newPath(&Bond{popts: PathOptions{QueuePackets: 1}}, name, nil)
	rec := &recorder{}
	rec.pc.Store(&p.pc)
	return rec, p.state, &p.pc
}
