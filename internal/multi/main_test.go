package multi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the coordinator runs agents on goroutines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
