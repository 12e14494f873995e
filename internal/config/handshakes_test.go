package config

import (
	"strings"
	"testing"
)

// TestHandshakesConfig: concentrator.handshakes decodes into
// HandshakesConfig, absent keys stay 0 (the tunnel's defaults), -1 turns a
// rate off, and a bad value is an error naming its key and line.
func TestHandshakesConfig(t *testing.T) {
	dir := configDir(t)
	for _, tc := range []struct {
		name, in, want string
		check          func(*HandshakesConfig) bool
	}{
		{"all keys", "  handshakes: {rate_per_s: 800, burst: 50, per_source_per_s: 5, per_source_burst: 10, retry_above: 32}\n", "",
			func(h *HandshakesConfig) bool {
				return *h == HandshakesConfig{RatePerS: 800, Burst: 50, PerSourcePerS: 5, PerSourceBurst: 10, RetryAbove: 32}
			}},
		{"rate off, rest default", "  handshakes: {rate_per_s: -1}\n", "",
			func(h *HandshakesConfig) bool { return *h == HandshakesConfig{RatePerS: -1} }},
		{"negative rate", "  handshakes: {rate_per_s: -5}\n", "bondd.yaml:9: concentrator.handshakes.rate_per_s: expected a positive number", nil},
		{"negative burst", "  handshakes: {burst: -1}\n", "bondd.yaml:9: concentrator.handshakes.burst: expected a positive number", nil},
		{"retry_above text", "  handshakes: {retry_above: always}\n", "bondd.yaml:9: concentrator.handshakes.retry_above: expected an integer", nil},
		{"unknown key", "  handshakes: {rate: 5}\n", "concentrator.handshakes.rate", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseWith("bondd.yaml", []byte(concentratorOK+tc.in), Options{Dir: dir})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h := c.Concentrator.Handshakes; h == nil || !tc.check(h) {
				t.Errorf("handshakes %+v", h)
			}
		})
	}
}
