// Package emu is bondd's userspace link emulator. The kernel bondd is tested
// on has no netem, so emu reproduces delay, jitter, loss, rate limits,
// trace-driven capacity and scheduled outages in Go.
//
// The package has three layers:
//
//   - [Link] is a pure, deterministic model of one direction of a link. Given
//     a [LinkConfig], a seed and a sequence of (arrival time, size) pairs, it
//     decides for each packet whether it is dropped (and why) or when it is
//     released. Time is a [time.Duration] since the model's start, so tests
//     drive it with virtual time and finish in milliseconds.
//   - [Relay] is a UDP front end in the style of quic-go's quicproxy: it
//     relays datagrams between clients and one upstream address through one
//     Link per direction, releasing each packet at the time the model says.
//   - [CellularScenario] and [LEOScenario] build ready-made path models, either
//     replaying the real traces of the shared data folder (Mahimahi, 5Gophers,
//     Starlink) or, when the folder is absent, built-in models fitted to those
//     traces (see builtin.go).
//
// The trace files are third-party data and are never copied into the
// repository; [DefaultTracesDir] finds them beside the checkout.
//
// emu imports no other bondd package.
package emu
