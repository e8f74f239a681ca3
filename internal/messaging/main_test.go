package messaging

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a message ledger's journal flushes on a goroutine of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
