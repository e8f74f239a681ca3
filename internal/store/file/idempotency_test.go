package file

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

func TestRecordLookupInvalidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Record("k1", "charge", "p1", map[string]any{"id": json.Number("12345678901234567890")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Record("k2", "charge", "p1", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("k2"); !ok {
		t.Fatal("a recorded result is not served")
	}
	if err := c.Invalidate(context.Background(), []string{"k2"}, "p1"); err != nil {
		t.Fatal(err)
	}
	c = reopen(t, c, path)
	out, ok := c.Lookup("k1")
	if !ok || out.(map[string]any)["id"].(json.Number).String() != "12345678901234567890" {
		t.Fatalf("stored output lost precision or vanished: %v %v", out, ok)
	}
	if _, ok := c.Lookup("k2"); ok || c.Len() != 1 {
		t.Fatal("a tombstoned result is still served")
	}
}

// TestBeginClaimsLocallyAndCommitsThroughRecord: a miss hands out a local
// claim whose Commit is Record (durable: it survives a reopen); a stored
// result is a hit without a claim; a released claim stores nothing, and a
// second Begin of a key in flight is not merged with the first: it takes
// the next epoch, and the first claim can no longer commit.
func TestBeginClaimsLocallyAndCommitsThroughRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	out, hit, claim, err := c.Begin(ctx, "k1", "charge", "p1")
	if err != nil || hit || out != nil || claim == nil {
		t.Fatalf("a miss: out %v hit %v claim %v err %v", out, hit, claim, err)
	}
	_, hit2, claim2, err := c.Begin(ctx, "k1", "charge", "p2")
	if err != nil || hit2 || claim2 == nil {
		t.Fatalf("a second Begin of a key in flight: hit %v claim %v err %v; the file store's claims are local and do not wait", hit2, claim2, err)
	}
	if claim.Epoch() != 1 || claim2.Epoch() != 2 {
		t.Fatalf("epochs %d and %d; want 1 and 2", claim.Epoch(), claim2.Epoch())
	}
	claim2.Release()
	if _, ok := c.Lookup("k1"); ok {
		t.Fatal("a released claim stored a result")
	}
	if err := claim.Commit(ctx, map[string]any{"id": "ch_0"}); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("the first claim's Commit after a second claim = %v; want store.ErrSuperseded", err)
	}
	_, _, claim, err = c.Begin(ctx, "k1", "charge", "p2")
	if err != nil || claim == nil || claim.Epoch() != 3 {
		t.Fatalf("a third Begin: claim %v err %v; want the claim at epoch 3", claim, err)
	}
	if err := claim.Commit(ctx, map[string]any{"id": "ch_1"}); err != nil {
		t.Fatal(err)
	}
	c = reopen(t, c, path)
	out, hit, claim, err = c.Begin(ctx, "k1", "charge", "p3")
	if err != nil || !hit || claim != nil || out.(map[string]any)["id"] != "ch_1" {
		t.Fatalf("a committed result after a reopen: out %v hit %v claim %v err %v", out, hit, claim, err)
	}
}

// Claims write nothing: each start journals its generation once, and its
// epochs lie above every epoch of the starts before it, so an epoch handed
// out before a crash (whose claim never reached the journal) is never
// handed out again.
func TestEpochsOfAStartLieAboveEveryEarlierStarts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, first, err := c.Begin(ctx, "k", "charge", "p1")
	if err != nil || first.Epoch() != 1 {
		t.Fatalf("a fresh journal's first claim: %v, err %v; want epoch 1", first, err)
	}
	lines, _ := c.j.Stats()
	c = reopen(t, c, path) // the claim never committed, as after a crash
	if after, _ := c.j.Stats(); after != lines+1 {
		t.Fatalf("journal lines %d after a claim and a reopen, %d before; want one more, the new generation's", after, lines)
	}
	for want := uint64(1<<generationShift + 1); want <= 1<<generationShift+2; want++ {
		_, _, cl, err := c.Begin(ctx, "k", "charge", "p2")
		if err != nil || cl.Epoch() != want {
			t.Fatalf("a claim after the reopen: %v err %v; want epoch %d", cl, err, want)
		}
		cl.Release()
	}
	if n, _ := c.j.Stats(); n != lines+1 {
		t.Fatalf("claims wrote to the journal: %d lines, want %d", n, lines+1)
	}
}

// reopen closes c and opens its journal again, closed when the test ends.
func reopen(t *testing.T, c *Idempotency, path string) *Idempotency {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Under journal_sync = proposal a committed result is a hit at once and in
// the file at once (a killed process keeps it); Flush is what makes it
// durable (internal/journal's power-cut test), and a journal that can no
// longer write refuses Begin rather than answer from what it may never
// flush.
func TestIdempotencyPerProposalSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idempotency.jsonl")
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	c.perProposal = true
	ctx := context.Background()
	_, hit, claim, err := c.Begin(ctx, "k", "charge", "p1")
	if err != nil || hit {
		t.Fatalf("Begin = hit %v, %v; want a claim", hit, err)
	}
	if err := claim.Commit(ctx, "charged"); err != nil {
		t.Fatal(err)
	}
	if out, hit, _, err := c.Begin(ctx, "k", "charge", "p2"); err != nil || !hit || out != "charged" {
		t.Fatalf("Begin after Commit = %v hit %v, %v; want the hit", out, hit, err)
	}
	written := false
	if _, err := journal.Read(path, func(key string, _ []byte) { written = written || key == "k" }); err != nil || !written {
		t.Fatalf("the file before Flush: result written %v, %v; want it written", written, err)
	}
	if err := c.Flush(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.Begin(ctx, "k", "charge", "p3"); err == nil {
		t.Fatal("Begin on a journal that takes no more records succeeded; under journal_sync = proposal it is to fail")
	}
}

func TestParseSync(t *testing.T) {
	for in, want := range map[string]Sync{"": SyncFull, "full": SyncFull, "proposal": SyncProposal} {
		if got, err := ParseSync(in); err != nil || got != want {
			t.Errorf("ParseSync(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"FULL", "off", "normal", " proposal"} {
		if _, err := ParseSync(in); err == nil || !strings.Contains(err.Error(), "use full") {
			t.Errorf("ParseSync(%q) = %v; want a refusal naming the modes", in, err)
		}
	}
}
