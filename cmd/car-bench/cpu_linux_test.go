package main

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spin uses at least d of this process's CPU, read the way the meter reads it.
func spin(t *testing.T, d time.Duration) {
	t.Helper()
	from, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for {
		for i := 0; i < 100_000; i++ {
			x += i ^ x
		}
		now, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-from >= d {
			break
		}
	}
	_ = x
}

// TestCPUMeterPerUnit: what the process used between a mark and the
// reading is divided over the units of the phase, for the daemon's process
// and car-bench's (here both this one).
func TestCPUMeterPerUnit(t *testing.T) {
	m := newCPUMeter(os.Getpid())
	mark := m.mark()
	spin(t, 4*time.Millisecond)
	c, ok := m.per(mark, 2)
	if !ok {
		t.Fatal("no reading")
	}
	// At least 4 ms over 2 units, read once for each process.
	if c.BenchUs < 2000 || c.DaemonUs < 2000 {
		t.Fatalf("after 4 ms of CPU over 2 units: %+v, want at least 2,000 µs each", c)
	}
	if _, ok := m.per(mark, 0); ok {
		t.Fatal("a phase of no units has a cost")
	}
}

// TestCPUMeterWithoutTheDaemon: a daemon process that cannot be read leaves
// car-bench's CPU alone, and the report says how to have the daemon's.
func TestCPUMeterWithoutTheDaemon(t *testing.T) {
	const gone = 1<<22 - 1 // the highest pid the kernel can give
	if err := syscall.Kill(gone, 0); !errors.Is(err, syscall.ESRCH) {
		t.Skipf("a process %d is here (%v)", gone, err)
	}
	m := newCPUMeter(gone)
	mark := m.mark()
	spin(t, time.Millisecond)
	c, ok := m.per(mark, 1)
	if !ok || c.DaemonUs != 0 || c.BenchUs < 1000 {
		t.Fatalf("%+v %v, want car-bench's CPU alone", c, ok)
	}
	if !strings.Contains(c.text(), "the daemon's is read with --spawn or --pid") {
		t.Fatalf("text %q does not say how to read the daemon's", c.text())
	}
	if _, err := cpuTime(1 << 30); err == nil || !strings.Contains(err.Error(), "process 1073741824: not a process id") {
		t.Fatalf("a process that is not there: %v", err)
	}
}
