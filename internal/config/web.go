package config

import (
	"net"
	"net/netip"

	"go.yaml.in/yaml/v3"
)

// DefaultWebListen is where bondd run serves its status page when the
// config has no web key: loopback only, so no token is needed.
const DefaultWebListen = "127.0.0.1:8740"

// webKeys are the keys of the web mapping, in the order docs/config.md
// lists them.
var webKeys = []string{"listen", "token_file", "cert_file", "key_file", "client_ca_file"}

// WebConfig configures the read-only status page (key web,
// docs/operations.md "The web page").
type WebConfig struct {
	// Listen is the TCP host:port of the page. Default DefaultWebListen;
	// YAML listen: "" turns the page off (Listen empty after Defaults).
	// An address that is not loopback (an empty host, 0.0.0.0, a LAN
	// address) requires TokenFile or ClientCAFile.
	Listen string
	// TokenFile holds the token a viewer must present (Authorization:
	// Bearer, or ?token= once, which sets a cookie); see LoadToken.
	// Optional on loopback.
	TokenFile string
	// CertFile and KeyFile are the PEM certificate and key of HTTPS; both
	// or neither. Optional: without them the page is plain HTTP.
	CertFile string
	KeyFile  string
	// ClientCAFile is a PEM file of the CA whose client certificates may
	// view the page (mutual TLS). It requires CertFile and KeyFile.
	ClientCAFile string

	// listenSet records that the file gave listen, even empty.
	listenSet bool
}

// web decodes the web mapping into w.
func (d *configDecoder) web(n *yaml.Node, w *WebConfig) {
	f := d.fields(n, "web", webKeys)
	if f == nil {
		return
	}
	if f["listen"] != nil {
		w.listenSet = true
		w.Listen = d.str(f["listen"], "web.listen", "host:port, or empty for no page")
	}
	w.TokenFile = d.str(f["token_file"], "web.token_file", "a file path")
	w.CertFile = d.str(f["cert_file"], "web.cert_file", "a file path")
	w.KeyFile = d.str(f["key_file"], "web.key_file", "a file path")
	w.ClientCAFile = d.str(f["client_ca_file"], "web.client_ca_file", "a file path")
}

// defaults gives Listen its default unless the file set it.
func (w *WebConfig) defaults() {
	if w.Listen == "" && !w.listenSet {
		w.Listen = DefaultWebListen
	}
}

// fileRefs are the files the web mapping names.
func (w *WebConfig) fileRefs() []fileRef {
	return []fileRef{
		{"web.token_file", &w.TokenFile, true, ""},
		{"web.cert_file", &w.CertFile, false, "the PEM file of the page's HTTPS certificate"},
		{"web.key_file", &w.KeyFile, false, "the PEM file of the page's HTTPS private key"},
		{"web.client_ca_file", &w.ClientCAFile, false, "the PEM file of the CA that signs the viewers' client certificates"},
	}
}

func (w *WebConfig) validate(v *configValidator) {
	if (w.CertFile == "") != (w.KeyFile == "") {
		v.errorf("web.cert_file", "web.cert_file and web.key_file go together; got only one")
	}
	if w.ClientCAFile != "" && w.CertFile == "" {
		v.errorf("web.client_ca_file", "client certificates need HTTPS: set web.cert_file and web.key_file too")
	}
	if w.Listen == "" {
		return
	}
	if _, ok := checkHostPort(w.Listen, true, true); !ok {
		v.errorf("web.listen", "expected host:port or :port with a port from 1 to 65535, like %s, or \"\" for no page, got %q", DefaultWebListen, w.Listen)
		return
	}
	if !IsLoopbackListen(w.Listen) && w.TokenFile == "" && w.ClientCAFile == "" {
		v.errorf("web.listen", "%s is not a loopback address, so anyone who reaches it would see the bond: set web.token_file (a bearer token) or web.client_ca_file (TLS client certificates), or listen on 127.0.0.1", w.Listen)
	}
}

// IsLoopbackListen reports whether the host:port addr listens on loopback
// only: a loopback IP literal or "localhost". An empty host, a wildcard
// address or any other name is not loopback.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
