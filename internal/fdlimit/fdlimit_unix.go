//go:build linux || darwin

package fdlimit

import (
	"fmt"
	"syscall"
)

// Raise sets the soft limit on open files to the hard limit (where the
// system caps it below that, to the cap) and returns the limit in force.
// Go's runtime already raises it to one below the hard limit when a
// program starts; this takes the last one and says what the process got.
func Raise() (Limit, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return Limit{}, fmt.Errorf("read the open-file limit: %w", err)
	}
	want := lim.Max
	if c := systemCap(); c > 0 && want > c {
		want = c
	}
	if lim.Cur < want {
		raised := lim
		raised.Cur = want
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return Limit{Soft: lim.Cur, Hard: lim.Max}, fmt.Errorf("raise the open-file limit from %d to %d: %w", lim.Cur, want, err)
		}
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return Limit{}, fmt.Errorf("read the open-file limit: %w", err)
		}
	}
	return Limit{Soft: lim.Cur, Hard: lim.Max}, nil
}
