package tunnel

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
)

// TestClientTLSVerification checks the edge's server verification: CA pool,
// pin, and both together (then both must hold).
func TestClientTLSVerification(t *testing.T) {
	cert, pin, err := SelfSignedCert("concentrator.test")
	if err != nil {
		t.Fatal(err)
	}
	other, otherPin, _ := SelfSignedCert("concentrator.test")
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	otherLeaf, _ := x509.ParseCertificate(other.Certificate[0])
	pool := func(c *x509.Certificate) *x509.CertPool { p := x509.NewCertPool(); p.AddCert(c); return p }
	tests := []struct {
		name  string
		roots *x509.CertPool
		pin   []byte
		want  string // error substring; "" = success
	}{
		{"pin", nil, pin, ""},
		{"wrong pin", nil, otherPin, "pinned"},
		{"ca", pool(leaf), nil, ""},
		{"wrong ca", pool(otherLeaf), nil, "certificate"},
		{"ca and pin", pool(leaf), pin, ""},
		{"ca right, pin wrong", pool(leaf), otherPin, "pinned"},
		{"pin right, ca wrong", pool(otherLeaf), pin, "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := ClientTLS("concentrator.test", tt.roots, tt.pin, nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					tls.Server(c, ServerTLS(cert, nil)).Handshake()
					c.Close()
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = tls.Client(c, conf).Handshake()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("handshake error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := ClientTLS("x", nil, nil, nil); err == nil {
		t.Error("no CA and no pin accepted")
	}
}
