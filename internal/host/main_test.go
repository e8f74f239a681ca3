package host

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the registry starts none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
