package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/parslee-ai/car-server/internal/store/file"
)

// TestMain fails the package when a test leaves a goroutine running: the
// runtime starts workers for the actions of a run and one per supervisor
// notification.
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

// stateHas reports whether rt's state holds key in tenant's namespace.
func stateHas(t testing.TB, rt *Runtime, tenant, key string) bool {
	t.Helper()
	_, ok, err := rt.State.Get(context.Background(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// stateKeys lists the keys of tenant's namespace in rt's state.
func stateKeys(t testing.TB, rt *Runtime, tenant string) []string {
	t.Helper()
	keys, err := rt.State.Keys(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// newRuntime is how these tests make a Runtime: over an in-memory state
// of the file store unless opts names one, and closed with the test, so
// that the workers it parked between runs are gone when goleak looks.
func newRuntime(tb testing.TB, opts Options) *Runtime {
	tb.Helper()
	if opts.State == nil {
		opts.State = file.NewState()
	}
	rt := NewRuntime(opts)
	tb.Cleanup(rt.Close)
	return rt
}
