package journal

import (
	"testing"

	"go.uber.org/goleak"
)

// The journal starts goroutines (its flusher, a compaction's rewrite); Close
// must wait for all of them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
