package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
)

// lockRetryMax caps the pause between attempts at a busy file lock; its
// holder is an operator command or the daemon, for one read and one write.
const lockRetryMax = 50 * time.Millisecond

// lockFile takes the advisory lock beside path (path + ".lock"), so that
// two processes' read-modify-writes of path (two agents issue-token runs,
// or one and the daemon's revoke) do not lose an update. It waits until the
// lock is free or ctx ends; the returned function releases it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	lockPath := path + ".lock"
	if err := atomicfile.MkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	f, err := atomicfile.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", lockPath, err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, lockRetryMax) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("another process holds %s (an agents command or the daemon): %w", lockPath, context.Cause(ctx))
		}
	}
}
