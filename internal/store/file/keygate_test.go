package file

import (
	"context"
	"errors"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

// TestKeyGateGivesOneWriterOfAKeyATurn: while a key's writer is in, another
// writer of that key waits (here until its context ends), a writer of
// another key goes in at once, and the key is free again once the first
// leaves.
func TestKeyGateGivesOneWriterOfAKeyATurn(t *testing.T) {
	var g keyGate
	leave, err := g.enter(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.enter(done, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second writer of a key in use got %v; want it to wait until its context ended", err)
	}
	other, err := g.enter(done, "other")
	if err != nil {
		t.Fatalf("a writer of another key waited: %v", err)
	}
	other()
	entered := make(chan func(), 1)
	go func() {
		l, err := g.enter(context.Background(), "k")
		if err != nil {
			t.Error(err)
			l = func() {}
		}
		entered <- l
	}()
	leave()
	(<-entered)()
	if l, err := g.enter(done, "k"); err != nil {
		t.Fatalf("the key is still taken after both writers left: %v", err)
	} else {
		l()
	}
}

// TestRollbackKeepsAnotherProposalsResult: the file cache's claims are
// local, so two proposals can claim one key; the later claim stores its
// result, the earlier one is refused, and the rollback of the earlier
// proposal leaves the later one's result, in this run and after a reopen.
func TestRollbackKeepsAnotherProposalsResult(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/idempotency.jsonl"
	c, _, err := OpenIdempotency(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, claim1, _ := c.Begin(ctx, "k", "charge", "p1")
	_, _, claim2, _ := c.Begin(ctx, "k", "charge", "p2")
	if first != nil || claim1 == nil || claim2 == nil {
		t.Fatal("two local claims of one key were not both handed out")
	}
	if err := claim2.Commit(ctx, "p2's"); err != nil {
		t.Fatal(err)
	}
	if err := claim1.Commit(ctx, "p1's"); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("the earlier claim's Commit = %v; want store.ErrSuperseded", err)
	}
	if err := c.Invalidate(ctx, []string{"k"}, "p1"); err != nil {
		t.Fatal(err)
	}
	if out, ok := c.Lookup("k"); !ok || out != "p2's" {
		t.Fatalf("after p1's rollback k holds %v %v; want p2's result", out, ok)
	}
	c = reopen(t, c, path)
	if out, ok := c.Lookup("k"); !ok || out != "p2's" {
		t.Fatalf("after a reopen k holds %v %v; want p2's result", out, ok)
	}
	if err := c.Invalidate(ctx, []string{"k"}, "p2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("k"); ok || c.Len() != 0 {
		t.Fatal("p2's own rollback left its result")
	}
}
