package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r) // Fatalf does not return; stand in for runtime.Goexit
}

func run(t *testing.T, limit time.Duration, cond func() bool) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	Eventually(r, limit, "the thing", cond)
	return ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if failed := run(t, time.Hour, func() bool { n++; return n == 3 }); failed != "" || n != 3 {
		t.Fatalf("failed %q after %d calls, want success on the third", failed, n)
	}
}

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	failed := run(t, 0, func() bool { return false })
	if !strings.Contains(failed, "the thing did not happen within") {
		t.Fatalf("failure %q", failed)
	}
}
