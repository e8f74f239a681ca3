package idempotency

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the cache writes tombstones on goroutines, and its journal flushes on one of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
