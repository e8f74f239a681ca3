package file

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the
// journals flush on goroutines of their own, and every bus subscription
// has one.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
