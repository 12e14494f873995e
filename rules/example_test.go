package rules_test

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/bondd/bondd/classify"
	"github.com/bondd/bondd/rules"
)

// An RTP H.264 packet of a delta frame (NAL type 1): IPv4, UDP 40000 →
// 5004, RTP payload type 96, SSRC 0x0000abcd, timestamp 90000.
var pFramePacket, _ = hex.DecodeString("4500002c00000000401100000a0000010a000002" +
	"9c40138c00180000" +
	"8060020100015f900000abcd" +
	"41e0")

func ExampleCompileBytes() {
	set, err := rules.CompileBytes("edge.yaml", []byte(`
rules:
  - id: pframes-in-slack
    priority: 400
    match: {frame_type: P, pending_iframe: true}
    actions: {priority: highest}
  - id: colocate
    priority: 200
    match: {frame_id: {exists: true}}
    actions: {affinity: frame_id}
  - id: free-path
    priority: 100
    actions: {prefer: {cost_class: free}}
`), rules.Options{})
	if err != nil {
		fmt.Println(err) // every problem, as edge.yaml:LINE: message
		return
	}
	c, _ := classify.New(classify.Options{
		RTPPorts:     []classify.PortRange{{Lo: 5004, Hi: 5004}},
		PayloadTypes: map[uint8]classify.Codec{96: classify.CodecH264},
	})
	var (
		md  classify.Metadata
		ann = rules.Annotations{PendingIFrame: true} // filled by the policy package
		d   rules.Directive                          // reused for every packet
	)
	c.Parse(pFramePacket, &md)
	set.Evaluate(&md, &ann, &d)
	fmt.Println(&d)
	fmt.Printf("affinity object %016x, %d rules matched\n", d.AffinityID, d.Rules.Count())
	// Output:
	// priority=255 prefer=cost_class=free affinity=frame_id
	// affinity object 0000abcd00015f90, 3 rules matched
}

func ExampleCompileBytes_errors() {
	_, err := rules.CompileBytes("edge.yaml", []byte(`
rules:
  - id: video
    priority: 1
    match: {frme_type: IDR, dscp: 64}
    actions: {fec: {mode: fixed}}
`), rules.Options{})
	fmt.Println(err)
	// Output:
	// edge.yaml:5: unknown key "frme_type" (did you mean "frame_type"?)
	// edge.yaml:5: match bad value "64" for dscp: above 63
	// edge.yaml:6: fec: mode fixed needs parity
}

func ExampleWatcher() {
	dir, _ := os.MkdirTemp("", "rules")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rules.yaml")
	os.WriteFile(path, []byte("rules:\n  - {id: a, priority: 1, actions: {priority: 7}}\n"), 0o644)

	w, err := rules.NewWatcher(rules.WatcherOptions{
		Path:   path,
		Logger: slog.New(slog.DiscardHandler), // the daemon's logger
	})
	if err != nil {
		fmt.Println(err) // the daemon refuses to start
		return
	}
	defer w.Close()
	// Per packet (batch): w.Current().Evaluate(&md, &ann, &d), no lock.
	fmt.Println(w.Current().Rule(0).ID)

	// A broken file keeps the running set; the error names file and line.
	os.WriteFile(path, []byte("rules:\n  - {id: a, priority: x, actions: {priority: 7}}\n"), 0o644)
	err = w.Reload() // what the daemon does on SIGHUP
	fmt.Println(err != nil, w.Current().Rule(0).ID)
	// Output:
	// a
	// true a
}

func ExampleInstallLimiter() {
	var l rules.InstallLimiter // one per peer session
	now := time.Now()
	allowed := 0
	for i := 0; i < 15; i++ {
		if l.AllowAt(now) {
			allowed++
		}
	}
	fmt.Println(allowed, l.AllowAt(now.Add(100*time.Millisecond)))
	// Output: 10 true
}
