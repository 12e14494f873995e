package bench

// The scale bench's measurements of its own process: memory, CPU time,
// the loopback's datagrams, wake-ups, load and profiles.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scaleSample is the process's memory at one moment: bytes, and the
// number of goroutines.
type scaleSample struct{ rss, heap, stack, live, goroutines uint64 }

// sampleMemory forces a GC, returns freed memory to the OS and reads the
// resident set (VmRSS) and the Go heap in use plus goroutine stacks.
func sampleMemory() scaleSample {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live) // what the collection just run found reachable
	return scaleSample{rss: readVmRSS(), heap: ms.HeapInuse + ms.StackInuse, stack: ms.StackInuse, live: live[0].Value.Uint64(),
		goroutines: uint64(runtime.NumGoroutine())}
}

// readVmRSS returns VmRSS of /proc/self/status in bytes (0 if unknown).
func readVmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime returns the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// udpDatagramsOut returns the UDP datagrams sent in this network namespace
// (OutDatagrams of /proc/net/snmp; 0 if unknown). On the bench's loopback
// every datagram is sent once and received once, by the node or an edge.
func udpDatagramsOut() uint64 { return udpCounter("OutDatagrams") }

// udpRcvbufErrors returns the UDP datagrams this network namespace dropped
// because a socket's receive buffer was full (RcvbufErrors of
// /proc/net/snmp; 0 if unknown): on the bench's loopback, datagrams the
// node or an edge did not read in time.
func udpRcvbufErrors() uint64 { return udpCounter("RcvbufErrors") }

// udpCounter returns the Udp counter name of /proc/net/snmp, 0 if unknown.
func udpCounter(name string) uint64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == name && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// voluntarySwitches returns the process's voluntary context switches
// (getrusage ru_nvcsw): how often its threads blocked, a count of its
// wakeups.
func voluntarySwitches() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return uint64(ru.Nvcsw)
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

const mib = 1 << 20

// writeHeapProfile writes the heap profile (runtime/pprof) to file.
func writeHeapProfile(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeProfile writes the named runtime/pprof profile (goroutine, ...) to
// file.
func writeProfile(name, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile starts a CPU profile (runtime/pprof) into
// prefix.what.n when prefix is set, and returns its stop; a profile that
// cannot start (another one runs) is skipped.
func startCPUProfile(prefix, what string, n int) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", prefix, what, n))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
