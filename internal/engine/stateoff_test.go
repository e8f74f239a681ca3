package engine

import (
	"context"
	"errors"
	"testing"
)

// TestARuntimeWithoutStateReadsEmptyAndRefusesWrites: Options.State nil
// turns state off; reads see nothing, and a write says why it fails.
func TestARuntimeWithoutStateReadsEmptyAndRefusesWrites(t *testing.T) {
	rt := NewRuntime(Options{})
	t.Cleanup(rt.Close)
	ctx := context.Background()
	if _, ok, err := rt.State.Get(ctx, "", "k"); ok || err != nil {
		t.Fatalf("a read of state that is off: found %v, %v", ok, err)
	}
	if snap, err := rt.State.Snapshot(ctx, ""); len(snap) != 0 || err != nil {
		t.Fatalf("a snapshot of state that is off: %v, %v", snap, err)
	}
	if err := rt.State.Set(ctx, "", "k", "v"); !errors.Is(err, errStateOff) {
		t.Fatalf("a write to state that is off: %v, want errStateOff", err)
	}
	if _, _, err := rt.State.Write(ctx, "", "k", "v"); !errors.Is(err, errStateOff) {
		t.Fatalf("a versioned write to state that is off: %v, want errStateOff", err)
	}
}
