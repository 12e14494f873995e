package ctrlmsg

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestControlRoundTrip(t *testing.T) {
	var b bytes.Buffer
	h := Hello{Type: TypeHello, Version: Version, EdgeID: "van-1", BondID: 7, Path: "cell-a",
		Labels: map[string]string{"cost_class": "metered"}, Token: []byte("secret")}
	if err := Write(&b, &h); err != nil {
		t.Fatal(err)
	}
	typ, body, err := Read(&b)
	if err != nil || typ != TypeHello {
		t.Fatalf("Read: %q %v", typ, err)
	}
	var got Hello
	if err := json.Unmarshal(body, &got); err != nil || got.Check(Version, lanes) != nil || got.Path != "cell-a" || string(got.Token) != "secret" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestHelloCheck(t *testing.T) {
	ok := Hello{Version: Version, EdgeID: "e", Path: "p"}
	tests := []struct {
		name string
		mod  func(*Hello)
		want string
	}{
		{"ok", func(*Hello) {}, ""},
		{"version", func(h *Hello) { h.Version = 9 }, "version"},
		{"no edge", func(h *Hello) { h.EdgeID = "" }, "edge id"},
		{"long path", func(h *Hello) { h.Path = strings.Repeat("x", 65) }, "path name"},
		{"many labels", func(h *Hello) {
			h.Labels = map[string]string{}
			for i := range 33 {
				h.Labels[string(rune('a'+i))] = "v"
			}
		}, "labels"},
		{"long value", func(h *Hello) { h.Labels = map[string]string{"k": strings.Repeat("v", 1025)} }, "out of bounds"},
		{"leo schedule", func(h *Hello) { h.LEO = &LEOSchedule{Seconds: []int{12, 27, 42, 57}, WindowMs: 100, HoldMs: -1} }, ""},
		{"leo default", func(h *Hello) { h.LEO = &LEOSchedule{} }, ""},
		{"leo second", func(h *Hello) { h.LEO = &LEOSchedule{Seconds: []int{60}} }, "LEO second"},
		{"leo many seconds", func(h *Hello) { h.LEO = &LEOSchedule{Seconds: make([]int, 61)} }, "LEO seconds"},
		{"leo window", func(h *Hello) { h.LEO = &LEOSchedule{WindowMs: 7501} }, "LEO window"},
		{"leo hold", func(h *Hello) { h.LEO = &LEOSchedule{HoldMs: -2} }, "LEO hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ok
			tt.mod(&h)
			err := h.Check(Version, lanes)
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadMsgBad(t *testing.T) {
	for _, in := range [][]byte{{}, {0}, {0, 5, '{'}, {0, 3, 'x', 'y', 'z'}, {0xff, 0xff}} {
		if _, _, err := Read(bytes.NewReader(in)); err == nil {
			t.Errorf("Read(%v) succeeded", in)
		}
	}
}

func TestHelloLane(t *testing.T) {
	h := Hello{Version: Version, EdgeID: "e", Path: "p", Lane: lanes}
	if err := h.Check(Version, lanes); err == nil || !strings.Contains(err.Error(), "lane") {
		t.Fatalf("lane %d of %d passed: %v", h.Lane, lanes, err)
	}
	h.Lane = -1
	if h.Check(Version, lanes) == nil {
		t.Fatal("lane -1 passed")
	}
}
