package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/web"
)

// TestStartWeb: off when listen is empty; served on an address; an address
// taken is an error unless it is the default one; a listener that is not
// loopback without a token is refused.
func TestStartWeb(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	src := func() status.Report { return status.Report{Role: config.RoleEdge, Version: "test"} }
	cfg := &config.Config{Role: config.RoleEdge}
	if srv, err := startWeb(cfg, src, log); srv != nil || err != nil {
		t.Errorf("listen \"\": %v, %v; want no page and no error", srv, err)
	}
	cfg.Web.Listen = "127.0.0.1:0"
	srv, err := startWeb(cfg, src, log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /: %d", resp.StatusCode)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg.Web.Listen = ln.Addr().String()
	if srv, err := startWeb(cfg, src, log); err == nil || !strings.Contains(err.Error(), "web.listen") {
		if srv != nil {
			srv.Close()
		}
		t.Errorf("a taken address: %v, want an error naming web.listen", err)
	}
	// The default address taken (by this test or anything else): no page,
	// no error.
	if l, err := net.Listen("tcp", config.DefaultWebListen); err == nil {
		defer l.Close()
	}
	cfg.Web.Listen = config.DefaultWebListen
	if srv, err := startWeb(cfg, src, log); srv != nil || err != nil {
		if srv != nil {
			srv.Close()
		}
		t.Errorf("the default address taken: %v, %v; want no page and no error", srv, err)
	}
	cfg.Web.Listen = "0.0.0.0:0"
	if srv, err := startWeb(cfg, src, log); !errors.Is(err, web.ErrNotSafe) {
		if srv != nil {
			srv.Close()
		}
		t.Errorf("0.0.0.0 without a token: %v, want web.ErrNotSafe", err)
	}
}
