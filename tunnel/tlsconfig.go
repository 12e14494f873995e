package tunnel

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"time"
)

// ALPN is the TLS application protocol bondd negotiates on every path.
const ALPN = "bondd/1"

// ClientTLS returns the edge's TLS configuration. The concentrator's
// certificate must chain to roots (when non-nil) and must match pin, the
// SHA-256 of its DER encoding (when 32 bytes): with both set, both are
// checked; at least one is required. clientCert, if non-nil, is presented
// for mutual TLS. It keeps TLS 1.3 session tickets (an LRU cache of
// sessionCacheSize), so that a returning path resumes (RFC 8446 §2.2): a
// ticket comes from a handshake in which the certificate and pin were
// verified, and only that node can use it; set ClientSessionCache to nil
// for a full handshake every time.
func ClientTLS(serverName string, roots *x509.CertPool, pin []byte, clientCert *tls.Certificate) (*tls.Config, error) {
	c := &tls.Config{ServerName: serverName, NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13,
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize)}
	hasPin := len(pin) == sha256.Size
	if roots == nil && !hasPin {
		return nil, errors.New("tunnel: need a CA pool or a 32-byte certificate pin to verify the concentrator")
	}
	c.RootCAs = roots
	if hasPin {
		// Without roots the pin replaces chain verification: it names the
		// one certificate the edge accepts. With roots, the chain is
		// verified first and the pin checked on top.
		c.InsecureSkipVerify = roots == nil
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("concentrator sent no certificate")
			}
			sum := sha256.Sum256(raw[0])
			if !bytes.Equal(sum[:], pin) {
				return errors.New("concentrator certificate does not match the pinned SHA-256")
			}
			return nil
		}
	}
	if clientCert != nil {
		c.Certificates = []tls.Certificate{*clientCert}
	}
	return c, nil
}

// ServerTLS returns the concentrator's TLS configuration: cert is its
// certificate; clientCAs, when non-nil, verifies edge client certificates
// (edges that use tokens present none).
func ServerTLS(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	if clientCAs != nil {
		c.ClientCAs = clientCAs
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// SelfSignedCert makes an ECDSA P-256 certificate for name, valid for a year,
// and returns it with the SHA-256 of its DER encoding (the pin for
// ClientTLS). The demo and tests use it; operators use their own PKI.
func SelfSignedCert(name string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, sum[:], nil
}
