package tunnel

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestControlRoundTrip(t *testing.T) {
	var b bytes.Buffer
	h := hello{Type: msgHello, Version: Version, EdgeID: "van-1", BondID: 7, Path: "cell-a",
		Labels: map[string]string{"cost_class": "metered"}, Token: []byte("secret")}
	if err := writeMsg(&b, &h); err != nil {
		t.Fatal(err)
	}
	typ, body, err := readMsg(&b)
	if err != nil || typ != msgHello {
		t.Fatalf("readMsg: %q %v", typ, err)
	}
	var got hello
	if err := json.Unmarshal(body, &got); err != nil || got.check() != nil || got.Path != "cell-a" || string(got.Token) != "secret" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestHelloCheck(t *testing.T) {
	ok := hello{Version: Version, EdgeID: "e", Path: "p"}
	tests := []struct {
		name string
		mod  func(*hello)
		want string
	}{
		{"ok", func(*hello) {}, ""},
		{"version", func(h *hello) { h.Version = 9 }, "version"},
		{"no edge", func(h *hello) { h.EdgeID = "" }, "edge id"},
		{"long path", func(h *hello) { h.Path = strings.Repeat("x", 65) }, "path name"},
		{"many labels", func(h *hello) {
			h.Labels = map[string]string{}
			for i := range 33 {
				h.Labels[string(rune('a'+i))] = "v"
			}
		}, "labels"},
		{"long value", func(h *hello) { h.Labels = map[string]string{"k": strings.Repeat("v", 1025)} }, "out of bounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ok
			tt.mod(&h)
			err := h.check()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadMsgBad(t *testing.T) {
	for _, in := range [][]byte{{}, {0}, {0, 5, '{'}, {0, 3, 'x', 'y', 'z'}, {0xff, 0xff}} {
		if _, _, err := readMsg(bytes.NewReader(in)); err == nil {
			t.Errorf("readMsg(%v) succeeded", in)
		}
	}
}
