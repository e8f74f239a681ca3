package main

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime is the CPU time process pid has used, all its threads together,
// to the nanosecond: its process CPU clock (clock_getcpuclockid(3) makes
// the same id), which counts the threads running as it is read too.
func cpuTime(pid int) (time.Duration, error) {
	const cpuClockSched = 2      // the kernel's CPUCLOCK_SCHED: time on a CPU
	if pid <= 0 || pid > 1<<22 { // the kernel's PID_MAX_LIMIT; 0 would be this process
		return 0, fmt.Errorf("read the CPU time of process %d: not a process id", pid)
	}
	clock := int32(^pid)<<3 | cpuClockSched
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}
