package tunnel

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bondd/bondd/tun/tuntest"
)

// BenchmarkHandshake measures one path connection end to end over
// loopback in one process: the edge's QUIC handshake with the
// concentrator and bondd's hello, then the close. Both ends' CPU is in the
// figure; run with -cpuprofile to see the concentrator's share. Cases:
// the concentrator's key type (ECDSA P-256, what bondd's docs generate;
// Ed25519; RSA 2048) and a fresh handshake against a resumed one (a TLS
// 1.3 session ticket from the edge's previous connection, RFC 8446 §2.2).
//
//	go test -run '^$' -bench Handshake -benchtime 2000x ./tunnel
func BenchmarkHandshake(b *testing.B) {
	for _, key := range []string{"ecdsa-p256", "ed25519", "rsa2048"} {
		for _, resume := range []bool{false, true} {
			name := key + "/fresh"
			if resume {
				name = key + "/resumed"
			}
			b.Run(name, func(b *testing.B) { benchHandshake(b, key, resume) })
		}
	}
}

func benchHandshake(b *testing.B, key string, resume bool) {
	cert, pin := benchCert(b, key)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dev := tuntest.New(1280, 8)
	c, err := NewConcentrator(ConcentratorOptions{Device: dev, MTU: 1280, Conn: pc, TLS: ServerTLS(cert, nil),
		Edges:      []EdgeAuth{{ID: "e", Token: []byte("t"), AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}},
		Handshakes: HandshakeOptions{Rate: -1, PerSource: -1}})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctls, err := ClientTLS("bench.test", nil, pin, nil)
	if err != nil {
		b.Fatal(err)
	}
	if !resume {
		ctls.ClientSessionCache = nil
	}
	edev := tuntest.New(1280, 8)
	e, err := NewEdge(EdgeOptions{ID: "e", Device: edev, MTU: 1280, Concentrator: pc.LocalAddr().String(), TLS: ctls, Token: []byte("t"),
		Uplinks: []UplinkOptions{{Name: "a", Bind: netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		b.Fatal(err)
	}
	defer edev.Close()
	e.ctx, e.cancel = context.WithCancel(context.Background()) // the control writer's lifetime, as Start sets it
	defer func() { e.cancel(); e.wg.Wait() }()
	u := e.opts.Uplinks[0]
	resumed := 0
	dial := func() {
		conn, closeConn, _, err := e.dial(context.Background(), u, DefaultHandshakeTimeout, nil)
		if err != nil {
			b.Fatal(err)
		}
		if conn.ConnectionState().TLS.DidResume {
			resumed++
		}
		conn.CloseWithError(codeShutdown, "")
		closeConn()
	}
	dial() // warm up; gives the first session ticket
	resumed = 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		dial()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handshakes/s")
	if want := map[bool]int{false: 0, true: b.N}[resume]; resumed != want {
		b.Errorf("%d of %d handshakes resumed, want %d", resumed, b.N, want)
	}
}

// benchCert returns a self-signed certificate with a key of the given
// type and its pin.
func benchCert(b testing.TB, key string) (tls.Certificate, []byte) {
	var priv any
	var pub any
	switch key {
	case "ed25519":
		p, k, _ := ed25519.GenerateKey(rand.Reader)
		pub, priv = p, k
	case "rsa2048":
		k, _ := rsa.GenerateKey(rand.Reader, 2048)
		pub, priv = &k.PublicKey, k
	default:
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		pub, priv = &k.PublicKey, k
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench.test"}, DNSNames: []string{"bench.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, sum[:]
}
