//go:build !linux

package emu

import "time"

// preciseSleep falls back to time.Sleep outside Linux.
func preciseSleep(d time.Duration) { time.Sleep(d) }
