package tunnel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/bondd/bondd/tun"
)

// Benchmarks of the whole bond over loopback UDP with in-memory TUNs,
// against raw quic-go DATAGRAMs on the same loopback in the same run:
//
//	go test -run '^$' -bench 'Throughput|Latency' -benchtime 20000x ./tunnel
//
// Throughput offers 1200-byte packets as fast as the sender can and reports
// what arrives (Mbit/s, kpps, delivered fraction) and the CPU time both
// ends used per packet delivered (µs, user and system, the whole process:
// on a machine whose cores the pipeline fills, the throughput ratio
// follows the inverse of this one). Latency paces 1200-byte
// packets at 20 Mbit/s and reports the p50 and p99 one-way delay in µs. The
// bond runs with its default adaptive FEC; BENCH_FEC_OFF=1 turns it off for
// an A/B comparison, and BENCH_DUMP=1 prints both ends' bond statistics
// (JSON, on stderr) after each bond benchmark.

const benchPacket = 1200

// rawQUIC is one quic-go connection pair on loopback with datagrams on.
type rawQUIC struct {
	client, server *quic.Conn
	close          func()
}

func newRawQUIC(b testing.TB) *rawQUIC {
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

// benchDevice is a TUN stand-in that, like the kernel device, makes no
// garbage: Read copies a template packet (with the payload's first 8 bytes
// replaced by the value sent on in) and Write hands the packet to a callback.
type benchDevice struct {
	tmpl   []byte
	in     chan uint64
	write  func(pkt []byte)
	closed chan struct{}
	events chan tun.Event
}

func newBenchDevice(tmpl []byte, write func([]byte)) *benchDevice {
	return &benchDevice{tmpl: tmpl, in: make(chan uint64, 1024), write: write,
		closed: make(chan struct{}), events: make(chan tun.Event)}
}

func (d *benchDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case v := <-d.in:
		n := copy(bufs[0][offset:], d.tmpl)
		binary.BigEndian.PutUint64(bufs[0][offset+28:], v)
		sizes[0] = n
		return 1, nil
	case <-d.closed:
		return 0, os.ErrClosed
	}
}

func (d *benchDevice) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		d.write(b[offset:])
	}
	return len(bufs), nil
}

func (d *benchDevice) File() *os.File           { return nil }
func (d *benchDevice) MTU() (int, error)        { return testMTU, nil }
func (d *benchDevice) Name() (string, error)    { return "bench", nil }
func (d *benchDevice) Events() <-chan tun.Event { return d.events }
func (d *benchDevice) BatchSize() int           { return 1 }
func (d *benchDevice) Close() error             { close(d.closed); close(d.events); return nil }

func bondFlow(b *testing.B, paths int) (flow, func()) {
	tmpl := udp4(edgeAddr, srvAddr, make([]byte, benchPacket-28))
	var got func([]byte)
	ready := make(chan struct{})
	edgeDev := newBenchDevice(tmpl, func([]byte) {})
	concDev := newBenchDevice(tmpl, func(pkt []byte) { <-ready; got(pkt[28:]) })
	tb := newTestBondDevices(b, token, paths, edgeDev, concDev, func(o *EdgeOptions) {
		if rc := os.Getenv("BENCH_RATE_CONTROL"); rc != "" {
			o.Paths.RateControl = rc // quic: quic-go's own controller, the baseline
		}
		if os.Getenv("BENCH_FEC_OFF") != "" {
			o.FEC.Mode = FECOff
		}
	})
	tb.waitActive(b, paths)
	return flow{
			send: func(p []byte) { edgeDev.in <- binary.BigEndian.Uint64(p) },
			recv: func(ctx context.Context, fn func([]byte)) {
				got = fn
				close(ready)
				<-ctx.Done()
			},
		}, func() {
			if os.Getenv("BENCH_DUMP") != "" {
				j, _ := json.MarshalIndent(tb.edge.bond.Stats(), "", " ")
				os.Stderr.Write(j)
				j, _ = json.MarshalIndent(tb.conc.Stats(), "", " ")
				os.Stderr.Write(j)
			}
		}
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

// benchWindow bounds the packets in flight (sent, not yet received) in the
// throughput benchmark, so that it measures what the pipeline carries rather
// than how fast a sender can overrun quic-go's 128-datagram receive queue.
const benchWindow = 100

func benchThroughput(b *testing.B, f flow) {
	payload := make([]byte, benchPacket-28)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	inflight := make(chan struct{}, benchWindow) // one token per packet in flight
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.recv(ctx, func([]byte) {
			n.Add(1)
			select {
			case <-inflight:
			default:
			}
		})
	}()
	stall := time.NewTimer(time.Hour)
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	sent := int64(0)
	for b.Loop() {
		select {
		case inflight <- struct{}{}:
		default:
			stall.Reset(50 * time.Millisecond) // a lost packet must not stall the benchmark
			select {
			case inflight <- struct{}{}:
			case <-stall.C:
			}
		}
		f.send(payload)
		sent++
	}
	for wait := time.Now(); n.Load() < sent && time.Since(wait) < 200*time.Millisecond; {
		time.Sleep(time.Millisecond)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	cancel()
	<-done
	b.StopTimer()
	got := float64(n.Load())
	b.ReportMetric(float64(cpu.Microseconds())/max(got, 1), "cpu-µs/pkt")
	b.ReportMetric(got*benchPacket*8/elapsed.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(got/elapsed.Seconds()/1e3, "kpps")
	b.ReportMetric(got/float64(sent), "delivered")
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// benchWarm is how long after the first packet the warm figures start:
// the bond's rate starts at policy.DefaultInitialRate and grows once per
// rate report, so the first packets of a flow wait in its queue.
const benchWarm = time.Second

// benchLatency paces b.N packets at rateMbps and reports one-way delay: the
// median and p99 of every packet, and the p99 of the packets sent
// benchWarm or more after the first.
func benchLatency(b *testing.B, f flow, rateMbps float64) {
	interval := time.Duration(benchPacket * 8 / (rateMbps * 1e6) * float64(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	var delays, warm []time.Duration // written by the receiver until done
	var arrived atomic.Int64
	done := make(chan struct{})
	start := time.Now() // before the receiver reads it
	go func() {
		defer close(done)
		f.recv(ctx, func(p []byte) {
			sent := int64(binary.BigEndian.Uint64(p))
			d := time.Duration(time.Now().UnixNano() - sent)
			delays = append(delays, d)
			if time.Unix(0, sent).Sub(start) >= benchWarm {
				warm = append(warm, d)
			}
			arrived.Add(1)
		})
	}()
	payload := make([]byte, benchPacket-28)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Sleep, not spin: a spinning sender would take one of the two
		// cores from the pipeline it measures.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		f.send(payload)
	}
	waitSettled(func() int { return int(arrived.Load()) }, 100*time.Millisecond) // what is still on its way
	cancel()
	<-done
	b.StopTimer()
	if len(delays) == 0 {
		b.Fatal("nothing arrived")
	}
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(q(delays, 0.50), "p50-µs")
	b.ReportMetric(q(delays, 0.99), "p99-µs")
	if len(warm) > 0 {
		b.ReportMetric(q(warm, 0.99), "p99-warm-µs")
	}
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
