package engine

import (
	"context"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// TestHarnessBackoffDrivesRetryWaits: retry_backoff_ms is the first wait,
// doubled per retry and capped by the daemon's RetryCap.
func TestHarnessBackoffDrivesRetryWaits(t *testing.T) {
	rt := NewRuntime(Options{RetryBase: 100 * time.Millisecond, RetryCap: time.Second})
	defer rt.Close()
	if got := rt.backoff(1); got != 100*time.Millisecond {
		t.Fatalf("default first wait %s, want the daemon's base", got)
	}
	if _, err := rt.UpdateHarness(context.Background(), func(c protocol.HarnessConfig) (protocol.HarnessConfig, error) {
		c.RetryBackoffMs = 300
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]time.Duration{1: 300 * time.Millisecond, 2: 600 * time.Millisecond, 3: time.Second} {
		if got := rt.backoff(n); got != want {
			t.Errorf("retry %d waits %s under retry_backoff_ms 300, want %s", n, got, want)
		}
	}
}
