//go:build !linux

package main

import (
	"fmt"
	"runtime"
	"time"
)

// cpuTime reads another process's CPU time on Linux only.
func cpuTime(pid int) (time.Duration, error) {
	return 0, fmt.Errorf("read the CPU time of process %d: not on %s", pid, runtime.GOOS)
}
