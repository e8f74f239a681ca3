package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/protocol"
)

// BenchmarkRoundTrip is the baseline: one statement through the pool.
func BenchmarkRoundTrip(b *testing.B) {
	db := benchNode(b)
	ctx := context.Background()
	for b.Loop() {
		var one int
		if err := db.pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotencyClaimCommit is one idempotent call's overhead: a
// claim and a commit, the renewal running.
func BenchmarkIdempotencyClaimCommit(b *testing.B) {
	db := benchNode(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		_, _, c, err := db.idem.Begin(ctx, fmt.Sprint("k", i), "charge", "p")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Commit(ctx, map[string]any{"ok": true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotencyHit is a resubmission answered from the store.
func BenchmarkIdempotencyHit(b *testing.B) {
	db := benchNode(b)
	ctx := context.Background()
	_, _, c, err := db.idem.Begin(ctx, "k", "charge", "p")
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Commit(ctx, map[string]any{"ok": true}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, hit, _, err := db.idem.Begin(ctx, "k", "charge", "p"); err != nil || !hit {
			b.Fatal(hit, err)
		}
	}
}

// BenchmarkEventsAppend appends b.N records and waits until all are in the
// database: the writer's throughput, Append itself never waiting.
func BenchmarkEventsAppend(b *testing.B) {
	db := benchNode(b)
	c := &chain{node: "a"}
	n := 0
	for b.Loop() {
		db.events.Append(c.next("action_succeeded", "p1"))
		n++
	}
	for db.EventStats().Written < uint64(n) {
		if db.EventStats().Dropped > 0 {
			b.Fatal("records dropped")
		}
	}
	b.ReportMetric(float64(db.EventStats().Batches), "batches")
}

func benchNode(b *testing.B) *DB {
	b.Helper()
	db, err := Open(context.Background(), Config{URL: pgtest.URL(b), Node: "a"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkTaintLookup is what the intent gate adds to the admission of a
// proposal that reads state: one lookup of its keys (here 16, two of them
// tainted) in a ledger of 10,000 keys.
func BenchmarkTaintLookup(b *testing.B) {
	db := benchNode(b)
	ctx := context.Background()
	entries := make([]protocol.TaintEntry, 10_000)
	for i := range entries {
		entries[i] = protocol.TaintEntry{Key: fmt.Sprint("t", i), ProposalID: "p", ActionID: "w", Tool: "web_fetch", Origin: "untrusted tool 'web_fetch'", At: "2026-03-01T00:00:00Z"}
	}
	if err := db.taint.Put(ctx, "", entries); err != nil {
		b.Fatal(err)
	}
	keys := []string{"t1", "t5000"}
	for i := range 14 {
		keys = append(keys, fmt.Sprint("clean", i))
	}
	for b.Loop() {
		if got, err := db.taint.Lookup(ctx, "", keys); err != nil || len(got) != 2 {
			b.Fatal(len(got), err)
		}
	}
}
