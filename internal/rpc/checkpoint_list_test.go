package rpc

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/internal/checkpoint"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// largeCheckpoints starts a daemon keeping n checkpoints of about size
// bytes each, saved through checkpoint.save.
func largeCheckpoints(tb testing.TB, n, size int) (*testServer, *client.Client) {
	tb.Helper()
	store, err := checkpoint.Open(filepath.Join(tb.TempDir(), "checkpoints"), n, int64(2*size))
	if err != nil {
		tb.Fatal(err)
	}
	ts := startServerWith(tb, serverSetup{engine: engine.Options{Checkpoints: store}})
	c, err := client.Dial(context.Background(), ts.url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	ctx := context.Background()
	const part = 8 << 20 // a frame is at most 16 MiB
	for i := 0; i < size; i += part {
		value := strings.Repeat("x", min(part, size-i))
		if err := c.Call(ctx, protocol.MethodStateSet, map[string]any{"key": fmt.Sprintf("big%d", i/part), "value": value}, nil); err != nil {
			tb.Fatal(err)
		}
	}
	for range n {
		if err := c.Call(ctx, protocol.MethodCheckpointSave, map[string]any{"name": "large"}, nil); err != nil {
			tb.Fatal(err)
		}
	}
	return ts, c
}

// listConcurrently makes n checkpoint.list calls at once and returns what
// one of them listed.
func listConcurrently(tb testing.TB, c *client.Client, n int) protocol.CheckpointListResult {
	tb.Helper()
	results := make([]protocol.CheckpointListResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = c.Call(context.Background(), protocol.MethodCheckpointList, nil, &results[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("checkpoint.list: %v", err)
		}
	}
	return results[0]
}

func TestConcurrentListsOfLargeCheckpointsReadNoState(t *testing.T) {
	const n, size = 8, 4 << 20
	_, c := largeCheckpoints(t, n, size)
	var one protocol.CheckpointListResult
	baseline := allocs.Bytes(func() { one = listConcurrently(t, c, 1) })
	if len(one.Checkpoints) != n {
		t.Fatalf("listed %d of %d checkpoints", len(one.Checkpoints), n)
	}
	for _, cp := range one.Checkpoints {
		if cp.Name != "large" || cp.Keys != 1 || cp.Bytes < size || cp.Corrupt != "" {
			t.Fatalf("listed %+v", cp)
		}
	}
	var many protocol.CheckpointListResult
	used := allocs.Bytes(func() { many = listConcurrently(t, c, 16) })
	t.Logf("16 concurrent lists of %d checkpoints of %d bytes: %d bytes allocated (client and daemon); one list: %d", n, size, used, baseline)
	if len(many.Checkpoints) != n {
		t.Fatalf("listed %d of %d checkpoints", len(many.Checkpoints), n)
	}
	// Each list reads only header lines: sixteen of them allocate a small
	// multiple of one, and less than one checkpoint's state (each read
	// every file in full before: 16 × 8 × 4 MiB).
	if used > 32*baseline || used > size {
		t.Fatalf("16 lists allocated %d bytes; one list %d, one checkpoint %d", used, baseline, size)
	}
}

// BenchmarkHostileCheckpointList16 is 16 concurrent checkpoint.list calls
// over 8 checkpoints of 24 MB; BENCHMARKS.md reports it.
func BenchmarkHostileCheckpointList16(b *testing.B) {
	_, c := largeCheckpoints(b, 8, 24<<20)
	for b.Loop() {
		listConcurrently(b, c, 16)
	}
}
