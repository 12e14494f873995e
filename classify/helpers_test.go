package classify

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/bondd/bondd/classify/capture"
)

// dataDir is where the real captures live: the shared data folder beside
// the repository (see the data README), not in it.
var dataDir = filepath.Join("..", "..", "shared", "data", "pcap")

// captureFile returns the path of a capture under dataDir, or skips the test
// when the data folder is absent.
func captureFile(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(dataDir, name)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("real capture %s not found (the shared data folder beside the repository is absent): %v", name, err)
	}
	return p
}

// capPacket is one frame of a capture, copied.
type capPacket struct {
	index int
	ip    []byte // nil for non-IP frames
}

// readCapture returns every frame of a capture with its IP packet, or skips
// the test when the capture is absent.
func readCapture(tb testing.TB, name string) []capPacket {
	tb.Helper()
	captureFile(tb, name)
	out, err := loadCapture(name)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// loadCapture reads a capture; an error when it is absent or unreadable.
func loadCapture(name string) ([]capPacket, error) {
	r, err := capture.Open(filepath.Join(dataDir, name))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []capPacket
	var f capture.Frame
	for {
		err := r.Next(&f)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		cp := capPacket{index: f.Index}
		if f.IP != nil {
			cp.ip = append([]byte(nil), f.IP...)
		}
		out = append(out, cp)
	}
}
