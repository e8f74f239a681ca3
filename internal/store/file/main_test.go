package file

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the
// journals flush on goroutines of their own, every bus subscription has
// one, and the run traces' incomplete markers wait on timers (Close must
// wait for all of them).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
