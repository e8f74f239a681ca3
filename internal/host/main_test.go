package host

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a
// registry starts one when it joins other daemons, and leave stops it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
