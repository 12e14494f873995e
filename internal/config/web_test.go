package config

import (
	"strings"
	"testing"
)

// TestWebConfig: the page is on by default on loopback, off with listen
// "", and a listener that is not loopback needs a token or client CA.
func TestWebConfig(t *testing.T) {
	dir := configDir(t)
	for _, tc := range []struct {
		name, web  string
		wantListen string
		wantErr    string // substring; "" means no error
	}{
		{"default", "", DefaultWebListen, ""},
		{"off", "web: {listen: \"\"}\n", "", ""},
		{"loopback", "web: {listen: \"127.0.0.1:9000\"}\n", "127.0.0.1:9000", ""},
		{"localhost v6", "web: {listen: \"[::1]:9000\"}\n", "[::1]:9000", ""},
		{"all addresses, no token", "web: {listen: \":8740\"}\n", "", "bondd.yaml:10: web.listen: :8740 is not a loopback address"},
		{"LAN, no token", "web: {listen: \"192.168.1.5:8740\"}\n", "", "set web.token_file (a bearer token) or web.client_ca_file"},
		{"LAN with a token", "web: {listen: \"0.0.0.0:8740\", token_file: van-17.token}\n", "0.0.0.0:8740", ""},
		{"token readable by others", "web: {listen: \"0.0.0.0:8740\", token_file: shared.token}\n", "", "web.token_file: token file"},
		{"client CA without HTTPS", "web: {listen: \"0.0.0.0:8740\", client_ca_file: edges-ca.pem}\n", "", "client certificates need HTTPS"},
		{"client CA", "web: {listen: \"0.0.0.0:8740\", cert_file: concentrator.pem, key_file: concentrator.key, client_ca_file: edges-ca.pem}\n", "0.0.0.0:8740", ""},
		{"cert without key", "web: {cert_file: concentrator.pem}\n", "", "web.cert_file and web.key_file go together"},
		{"bad address", "web: {listen: \"nowhere\"}\n", "", "web.listen: expected host:port"},
		{"unknown key", "web: {port: 1}\n", "", `web.port: unknown field "port"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseWith("bondd.yaml", []byte(edgeOK+tc.web), Options{Dir: dir})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Web.Listen != tc.wantListen {
				t.Errorf("web.listen %q, want %q", c.Web.Listen, tc.wantListen)
			}
		})
	}
}

func TestIsLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.1.2.3:1": true, "[::1]:1": true, "localhost:1": true,
		":1": false, "0.0.0.0:1": false, "[::]:1": false, "10.0.0.1:1": false, "example.com:1": false, "nonsense": false,
	} {
		if got := IsLoopbackListen(addr); got != want {
			t.Errorf("IsLoopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}
