//go:build linux || darwin

package fdlimit

import (
	"syscall"
	"testing"
)

// TestRaise lowers the soft limit, raises it, and reads what is in force.
func TestRaise(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(lim.Max, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	got, err := Raise()
	if err != nil {
		t.Fatal(err)
	}
	want := lim.Max
	if c := systemCap(); c > 0 && want > c {
		want = c
	}
	if got.Soft != want || got.Hard != lim.Max {
		t.Fatalf("Raise reported %+v, want soft %d and hard %d", got, want, lim.Max)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != want {
		t.Fatalf("the soft limit in force is %d, want %d", lim.Cur, want)
	}
}
