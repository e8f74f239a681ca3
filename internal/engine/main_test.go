package engine

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: the
// runtime starts one per action and one per supervisor notification.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

// mustJSON encodes v, failing the test when it cannot.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
