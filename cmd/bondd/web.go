package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/bondd/bondd/internal/config"
	"github.com/bondd/bondd/internal/status"
	"github.com/bondd/bondd/internal/web"
)

// startWeb serves the status page configured in cfg.Web (web.listen)
// from src. It returns nil, nil when the page is off, and also when the
// default address is taken by another program (logged): only an address
// the config names is worth refusing to start for.
func startWeb(cfg *config.Config, src func() status.Report, log *slog.Logger) (*web.Server, error) {
	w := cfg.Web
	if w.Listen == "" {
		return nil, nil
	}
	o := web.Options{Listen: w.Listen, Source: src, Logger: log}
	if w.TokenFile != "" {
		tok, err := cfg.LoadToken(w.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("web.token_file: %w", err)
		}
		o.Token = tok
	}
	if w.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(w.CertFile, w.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("web.cert_file, web.key_file: %w", err)
		}
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if w.ClientCAFile != "" {
			pem, err := os.ReadFile(w.ClientCAFile)
			if err != nil {
				return nil, fmt.Errorf("web.client_ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("web.client_ca_file %s: no PEM certificate in it", w.ClientCAFile)
			}
			o.TLS.ClientCAs, o.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	srv, err := web.Start(o)
	if errors.Is(err, syscall.EADDRINUSE) && w.Listen == config.DefaultWebListen {
		log.Warn("web page not served: its default address is in use; set web.listen to another address, or \"\" to turn the page off", "listen", w.Listen)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("web.listen: %w", err)
	}
	log.Info("web page", "url", srv.URL())
	return srv, nil
}
