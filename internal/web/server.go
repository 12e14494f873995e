package web

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
)

// Defaults and limits of the server.
const (
	// DefaultInterval is how often the page's data is sampled and sent.
	DefaultInterval = time.Second
	// MaxViewers is the most streams served at once; one more is answered
	// 503.
	MaxViewers = 32
	// cookieName carries the token after a ?token= request.
	cookieName = "bondd_web_token"
)

// writeTimeout bounds the write of one stream message: a reader that
// takes longer is dropped, not buffered for. A variable for the tests.
var writeTimeout = 5 * time.Second

//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Listen is the TCP host:port. Required. An address that is not
	// loopback (config.IsLoopbackListen) requires Token or a TLS config
	// that verifies client certificates.
	Listen string
	// Source returns the status report, the same as the control socket
	// serves. Required; called once per Interval from one goroutine.
	Source func() status.Report
	// Token, when set, is required on every request: "Authorization:
	// Bearer TOKEN", "?token=TOKEN" or the cookie that the latter sets.
	// Optional on loopback.
	Token []byte
	// TLS, when set, serves HTTPS with it; with ClientAuth set to
	// tls.RequireAndVerifyClientCert it admits only viewers with a client
	// certificate. Optional.
	TLS *tls.Config
	// Interval is the sampling period. Default DefaultInterval.
	Interval time.Duration
	// Logger logs the listener and dropped viewers. Optional.
	Logger *slog.Logger
}

// Server is a running page server. Close stops it.
type Server struct {
	o       Options
	ln      net.Listener
	srv     *http.Server
	hub     *hub
	viewers atomic.Int32
	wg      sync.WaitGroup
	stop    context.CancelFunc
	static  map[string][]byte // path → content
}

// ErrNotSafe is returned by Start for a listener that is not loopback and
// has neither a token nor TLS client certificates.
var ErrNotSafe = errors.New("web: a listener that is not loopback needs a token (web.token_file) or TLS client certificates (web.client_ca_file)")

// Start checks o, listens on o.Listen and serves until Close. Errors: a
// missing Source, an unsafe listener (ErrNotSafe, wrapped with the
// address), or the listen error.
func Start(o Options) (*Server, error) {
	if o.Source == nil {
		return nil, errors.New("web: no status source")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkSafe(o); err != nil {
		return nil, err
	}
	static, err := loadStatic()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{o: o, ln: ln, hub: newHub(o.Source, o.Interval), stop: cancel, static: static}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	s.hub.sample(time.Now()) // the first frame, before any viewer
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.hub.routineSample(ctx, o.Interval) }()
	go func() { defer s.wg.Done(); s.srv.Serve(ln) }()
	return s, nil
}

// checkSafe refuses a listener that is not loopback without a token or
// client certificates.
func checkSafe(o Options) error {
	if config.IsLoopbackListen(o.Listen) || len(o.Token) > 0 {
		return nil
	}
	if o.TLS != nil && o.TLS.ClientAuth == tls.RequireAndVerifyClientCert {
		return nil
	}
	return fmt.Errorf("%s: %w", o.Listen, ErrNotSafe)
}

// loadStatic reads the embedded page.
func loadStatic() (map[string][]byte, error) {
	m := make(map[string][]byte)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		m["/"+strings.TrimPrefix(p, "assets/")] = b
		return err
	})
	return m, err
}

// PageBytes is the size of the embedded page (HTML, CSS and JavaScript),
// bytes.
func PageBytes() int {
	m, _ := loadStatic()
	n := 0
	for _, b := range m {
		n += len(b)
	}
	return n
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the page's address, http:// or https://.
func (s *Server) URL() string {
	scheme := "http"
	if s.o.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + s.ln.Addr().String() + "/"
}

// Close stops the sampler and the server, ending every stream.
func (s *Server) Close() error {
	s.stop()
	err := s.srv.Close()
	s.wg.Wait()
	return err
}

// Handler is the server's HTTP handler: the page, the stream and the
// report, behind the security checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveStatic("/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /app.js", s.serveStatic("/app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /style.css", s.serveStatic("/style.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /api/stream", s.serveStream)
	mux.HandleFunc("GET /api/status", s.serveReport)
	return s.guard(mux)
}

// guard sets the security headers, allows GET and HEAD only, checks the
// Host header on an unauthenticated listener (DNS rebinding) and the
// token.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
			return
		}
		if len(s.o.Token) == 0 && !hostAllowed(r.Host) {
			http.Error(w, "this page answers only to an IP address or localhost", http.StatusForbidden)
			return
		}
		if len(s.o.Token) > 0 {
			switch tok := r.URL.Query().Get("token"); {
			case tok != "" && s.tokenOK(tok):
				http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", HttpOnly: true, Secure: s.o.TLS != nil, SameSite: http.SameSiteStrictMode})
				if r.URL.Path == "/" { // drop the token from the address bar
					q := r.URL.Query()
					q.Del("token")
					u := url.URL{Path: "/", RawQuery: q.Encode()}
					http.Redirect(w, r, u.String(), http.StatusSeeOther)
					return
				}
			case s.tokenOK(bearer(r)):
			case s.cookieOK(r):
			default:
				h.Set("WWW-Authenticate", `Bearer realm="bondd"`)
				http.Error(w, "unauthorized: give the token of web.token_file (Authorization: Bearer, or ?token=)", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names an IP address or
// localhost: a page without a token must not answer to a DNS name that
// could be rebound to loopback by another site.
func hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

func bearer(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

func (s *Server) tokenOK(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), s.o.Token) == 1
}

func (s *Server) cookieOK(r *http.Request) bool {
	c, err := r.Cookie(cookieName)
	return err == nil && s.tokenOK(c.Value)
}

func (s *Server) serveStatic(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.static[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	}
}

// serveReport is the status report as JSON, as bondd status --json reads
// it from the control socket.
func (s *Server) serveReport(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(s.hub.report())
}

// serveStream is the server-sent event stream: one "data:" message per
// sample, the view the query asks for (parseQuery). The first message of
// an edge view carries the history.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.viewers.Add(1) > MaxViewers {
		s.viewers.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("too many viewers: at most %d at once", MaxViewers), http.StatusServiceUnavailable)
		return
	}
	defer s.viewers.Add(-1)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	var last uint64
	first := true
	for {
		f, next := s.hub.latest()
		if f.tick != last || first {
			msg := s.hub.message(f, q, first)
			rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write(msg); err != nil {
				s.o.Logger.Debug("web viewer dropped", "remote", r.RemoteAddr, "err", err)
				return
			}
			if err := rc.Flush(); err != nil {
				s.o.Logger.Debug("web viewer dropped", "remote", r.RemoteAddr, "err", err)
				return
			}
			last, first = f.tick, false
		}
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
	}
}

// Viewers is the number of streams being served now.
func (s *Server) Viewers() int { return int(s.viewers.Load()) }
