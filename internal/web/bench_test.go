package web

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkViewers32 measures one sample delivered to MaxViewers viewers
// of an edge page (three paths), each on its own HTTP connection over
// loopback: an operation is one sample read, encoded and written to every
// viewer, and read by every viewer. The viewers run in the same process,
// so the figure is an upper bound of the server's cost. At one sample a
// second, ns/op divided by 1e7 is the percentage of a core (the metric
// %core).
func BenchmarkViewers32(b *testing.B) {
	benchViewers(b, &fakeSource{role: "edge", edges: 1}, "api/stream")
}

// BenchmarkFleet1000Viewers32 is BenchmarkViewers32 for a concentrator
// with 1,000 edges, every viewer on the first page of 50 rows sorted by
// loss.
func BenchmarkFleet1000Viewers32(b *testing.B) {
	benchViewers(b, &fakeSource{role: "concentrator", edges: 1000}, "api/stream?sort=loss&desc=1")
}

func benchViewers(b *testing.B, src *fakeSource, path string) {
	s := startFake(b, Options{Interval: time.Hour}, src)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	got := make(chan struct{}, MaxViewers)
	for range MaxViewers {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 4<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					got <- struct{}{}
				}
			}
		}()
	}
	for range MaxViewers { // the first message, with the history
		<-got
	}
	b.ResetTimer()
	for range b.N {
		s.hub.sample(time.Now())
		for range MaxViewers {
			<-got
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "%core")
}

// TestViewerCost runs BenchmarkViewers32 and checks that 32 viewers cost
// at most 2 % of a core at one sample a second (20 ms per sample).
func TestViewerCost(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark: not in -short")
	}
	r := testing.Benchmark(BenchmarkViewers32)
	perSample := time.Duration(r.NsPerOp())
	t.Logf("32 viewers: %v per sample (%.2f %% of a core at 1 Hz), %d samples", perSample, float64(perSample)/1e7, r.N)
	if perSample > 20*time.Millisecond {
		t.Errorf("32 viewers cost %v per sample, more than 2 %% of a core (20 ms) at one a second", perSample)
	}
}
