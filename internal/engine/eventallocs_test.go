//go:build !race

// The race detector's build drops a quarter of what goes back to a
// sync.Pool, so allocation counts are the plain build's.

package engine

import (
	"context"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// rawDiscard is a durable log that keeps the data as encoded (an
// EventSyncer, as the file store's) and keeps only the last record, its
// body copied as the contract says, into a buffer of its own.
type rawDiscard struct {
	discardLog
	kept *store.EventRecord
}

func (d rawDiscard) Append(r store.EventRecord) {
	body := append(d.kept.Body[:0], r.Body...)
	*d.kept = r
	d.kept.Body = body
}

func (rawDiscard) Sync(context.Context) error { return nil }

// The chain costs an append no allocation of its own: its hash input and
// the data's encoding are lent buffers, the time is written in place, and
// the hashes' text comes from slabs of sixteen. An append to the file
// store's log allocates nothing either: the record's body is lent, and the
// log copies it. (Before: three allocations alone, eleven to the file
// store's log.) The hashes stay right across slabs.
func TestAnAppendAllocatesNothingOfItsOwn(t *testing.T) {
	data := map[string]any{"type": "tool_call", "tool": "echo", "duration_ms": 1.25, "agent": "planner"}
	ev := Event{Kind: EventActionSucceeded, ProposalID: "p", ActionID: "a", Connection: "c", Data: data}

	alone := NewEventLog(100_000)
	if n := testing.AllocsPerRun(2000, func() { alone.Append(ev) }); n != 0 {
		t.Errorf("an append alone: %v allocations, want 0", n)
	}
	if verified, tampered := alone.VerifyChain(); tampered != -1 || verified != alone.Count() {
		t.Fatalf("the chain: %d verified of %d, tampered at %d", verified, alone.Count(), tampered)
	}

	last := store.EventRecord{Body: make([]byte, 0, 4096)}
	raw := NewEventLog(100_000)
	if err := raw.JoinCluster(context.Background(), "n1", rawDiscard{discardLog{storetest.NewEvents(nil)}, &last}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(2000, func() { raw.Append(ev) }); n != 0 {
		t.Errorf("an append to a log that keeps the data as encoded: %v allocations, want 0", n)
	}
	if err := CheckRecord(&last); err != nil {
		t.Fatalf("the last record: %v", err)
	}
	if verified, tampered := raw.VerifyChain(); tampered != -1 || verified != raw.Count() {
		t.Fatalf("the chain: %d verified of %d, tampered at %d", verified, raw.Count(), tampered)
	}
}
