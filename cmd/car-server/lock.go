package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// stateLock is the advisory lock that makes one daemon the primary of a
// state root.
type stateLock struct{ f *os.File }

// acquireLock takes the lock at path without waiting. When another process
// holds it, the error names that process.
func acquireLock(path string) (*stateLock, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("another car-server (pid %s) already runs on this state root: it holds %s; stop it, or give this one its own CAR_HOME and --port", pid, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &stateLock{f: f}, nil
}

// release drops the lock. The file stays: removing it would race a daemon
// that is opening it.
func (l *stateLock) release() {
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
