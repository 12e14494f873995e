package tunnel

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// Benchmarks of the whole bond over loopback UDP with in-memory TUNs,
// against raw quic-go DATAGRAMs on the same loopback in the same run:
//
//	go test -run '^$' -bench 'Throughput|Latency' -benchtime 20000x ./tunnel
//
// Throughput offers 1200-byte packets as fast as the sender can and reports
// what arrives (Mbit/s, kpps, delivered fraction). Latency paces 1200-byte
// packets at 20 Mbit/s and reports the p50 and p99 one-way delay in µs.

const benchPacket = 1200

// rawQUIC is one quic-go connection pair on loopback with datagrams on.
type rawQUIC struct {
	client, server *quic.Conn
	close          func()
}

func newRawQUIC(b *testing.B) *rawQUIC {
	cert, pin, err := SelfSignedCert("raw.test")
	if err != nil {
		b.Fatal(err)
	}
	spc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	str := &quic.Transport{Conn: spc}
	ln, err := str.Listen(ServerTLS(cert, nil), quicConfig(PathOptions{}.withDefaults(), nil))
	if err != nil {
		b.Fatal(err)
	}
	cpc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctr := &quic.Transport{Conn: cpc}
	ctls, _ := ClientTLS("raw.test", nil, pin, nil)
	accepted := make(chan *quic.Conn, 1)
	go func() {
		c, err := ln.Accept(context.Background())
		if err == nil {
			accepted <- c
		}
	}()
	cc, err := ctr.Dial(context.Background(), spc.LocalAddr(), ctls, quicConfig(PathOptions{}.withDefaults(), nil))
	if err != nil {
		b.Fatal(err)
	}
	sc := <-accepted
	return &rawQUIC{client: cc, server: sc, close: func() {
		cc.CloseWithError(0, "")
		sc.CloseWithError(0, "")
		ln.Close()
		ctr.Close()
		str.Close()
		cpc.Close()
		spc.Close()
	}}
}

// flow abstracts "send one packet in, get packets out" over the bond or raw QUIC.
type flow struct {
	send func(payload []byte)
	recv func(ctx context.Context, got func(payload []byte))
}

func bondFlow(b *testing.B, paths int) (flow, func()) {
	tb := newTestBond(b, token, paths)
	tb.waitActive(b, paths)
	return flow{
		send: func(p []byte) { tb.edgeDev.Inject(udp4(edgeAddr, srvAddr, p)) },
		recv: func(ctx context.Context, got func([]byte)) {
			for {
				select {
				case pkt := <-tb.concDev.Outbound():
					got(pkt[28:])
				case <-ctx.Done():
					return
				}
			}
		},
	}, func() {}
}

func rawFlow(b *testing.B) (flow, func()) {
	r := newRawQUIC(b)
	return flow{
		send: func(p []byte) { r.client.SendDatagram(p) },
		recv: func(ctx context.Context, got func([]byte)) {
			for {
				dg, err := r.server.ReceiveDatagram(ctx)
				if err != nil {
					return
				}
				got(dg)
			}
		},
	}, r.close
}

func benchThroughput(b *testing.B, f flow) {
	payload := make([]byte, benchPacket-28)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.recv(ctx, func([]byte) { n++ })
	}()
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		f.send(payload)
	}
	time.Sleep(200 * time.Millisecond) // drain
	elapsed := time.Since(start) - 200*time.Millisecond
	cancel()
	<-done
	b.StopTimer()
	b.ReportMetric(float64(n)*benchPacket*8/elapsed.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(float64(n)/elapsed.Seconds()/1e3, "kpps")
	b.ReportMetric(float64(n)/float64(b.N), "delivered")
}

func BenchmarkThroughput(b *testing.B) {
	b.Run("raw_quic", func(b *testing.B) {
		f, closeFn := rawFlow(b)
		defer closeFn()
		benchThroughput(b, f)
	})
	for _, paths := range []int{1, 3} {
		b.Run(map[int]string{1: "bond_1path", 3: "bond_3paths"}[paths], func(b *testing.B) {
			f, closeFn := bondFlow(b, paths)
			defer closeFn()
			benchThroughput(b, f)
		})
	}
}

// benchLatency paces b.N packets at rateMbps and reports one-way delay.
func benchLatency(b *testing.B, f flow, rateMbps float64) {
	interval := time.Duration(benchPacket * 8 / (rateMbps * 1e6) * float64(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	var delays []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.recv(ctx, func(p []byte) {
			delays = append(delays, time.Duration(time.Now().UnixNano()-int64(binary.BigEndian.Uint64(p))))
		})
	}()
	payload := make([]byte, benchPacket-28)
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		for d := time.Until(start.Add(time.Duration(i) * interval)); d > 0; d = time.Until(start.Add(time.Duration(i) * interval)) {
			if d > 200*time.Microsecond {
				time.Sleep(d - 100*time.Microsecond)
			}
		}
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		f.send(payload)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	b.StopTimer()
	if len(delays) == 0 {
		b.Fatal("nothing arrived")
	}
	slices.Sort(delays)
	q := func(p float64) float64 { return float64(delays[int(p*float64(len(delays)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(len(delays))/float64(b.N), "delivered")
}

func BenchmarkLatency20Mbps(b *testing.B) {
	b.Run("raw_quic", func(b *testing.B) {
		f, closeFn := rawFlow(b)
		defer closeFn()
		benchLatency(b, f, 20)
	})
	b.Run("bond_1path", func(b *testing.B) {
		f, closeFn := bondFlow(b, 1)
		defer closeFn()
		benchLatency(b, f, 20)
	})
}
