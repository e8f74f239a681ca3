package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

// BeginOrLegacy reads the key an older daemon gave the call in the claim's
// statement: a result there is a hit and the new key's claim is released;
// without one the claim stands; a result under the new key wins.
func TestBeginOrLegacyReadsTheOlderKeyWithTheClaim(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	storeResult(t, a, "old-key", "from the older daemon")

	out, hit, c, err := a.idem.BeginOrLegacy(ctxT(t), "new-key", "old-key", "fetch", "p1")
	if err != nil || !hit || c != nil || out != "from the older daemon" {
		t.Fatalf("BeginOrLegacy with a legacy result = %v, hit %v, claim %v, %v; want the older daemon's result", out, hit, c, err)
	}
	// The new key's claim was released: it is claimed again at once.
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	_, hit, c, err = a.idem.Begin(ctx, "new-key", "fetch", "p2")
	if err != nil || hit || c == nil {
		t.Fatalf("Begin of the new key after a legacy hit = hit %v, claim %v, %v; want a claim", hit, c, err)
	}
	c.Release()

	out, hit, c, err = a.idem.BeginOrLegacy(ctxT(t), "new-2", "old-2", "fetch", "p3")
	if err != nil || hit || c == nil {
		t.Fatalf("BeginOrLegacy without a legacy result = %v, hit %v, claim %v, %v; want a claim", out, hit, c, err)
	}
	if err := c.Commit(ctxT(t), "new"); err != nil {
		t.Fatal(err)
	}
	out, hit, _, err = a.idem.BeginOrLegacy(ctxT(t), "new-2", "old-key", "fetch", "p4")
	if err != nil || !hit || out != "new" {
		t.Fatalf("BeginOrLegacy of a key with its own result = %v, hit %v, %v; want that result", out, hit, err)
	}
}
