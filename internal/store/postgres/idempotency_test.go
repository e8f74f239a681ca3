package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// withoutBus leaves db's waiters to their re-check.
func withoutBus(db *DB) {
	db.idem.close()
	db.idem = newIdempotency(db.pool, db.cfg, nil, db.marks)
}

// waiting reports whether someone on db waits for key.
func waiting(db *DB, key string) bool {
	db.idem.mu.Lock()
	defer db.idem.mu.Unlock()
	return len(db.idem.waiters[key]) > 0
}

type beginResult struct {
	out any
	hit bool
	c   store.Claim
	err error
}

func beginAsync(ctx context.Context, db *DB, key, proposal string) <-chan beginResult {
	ch := make(chan beginResult, 1)
	go func() {
		out, hit, c, err := db.idem.Begin(ctx, key, "charge", proposal)
		ch <- beginResult{out, hit, c, err}
	}()
	return ch
}

// Two daemons meet the same keys at the same moment: for every key exactly
// one claims and dispatches, the other gets its result.
func TestIdempotencyClaimsOnceAcrossDaemons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bus   bool
		lease time.Duration
	}{
		{"notified", true, 30 * time.Second},
		{"re-checked", false, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			set := func(c *Config) { c.ClaimLease = tc.lease }
			a, b := openNode(t, url, "a", set), openNode(t, url, "b", set)
			if !tc.bus {
				withoutBus(a)
				withoutBus(b)
			}
			ctx := ctxT(t)
			const keys = 200
			type outcome struct {
				node string
				beginResult
			}
			results := make([][2]outcome, keys)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for k := range keys {
				for i, db := range []*DB{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						key := fmt.Sprintf("key-%d", k)
						out, hit, c, err := db.idem.Begin(ctx, key, "charge", "p-"+db.cfg.Node)
						if err == nil && c != nil {
							err = c.Commit(ctx, map[string]any{"by": db.cfg.Node, "n": json.Number("12345678901234567890")})
						}
						results[k][i] = outcome{db.cfg.Node, beginResult{out, hit, c, err}}
					}()
				}
			}
			close(start)
			wg.Wait()
			for k, pair := range results {
				claims := 0
				var claimant string
				for _, o := range pair {
					if o.err != nil {
						t.Fatalf("key %d on %s: %v", k, o.node, o.err)
					}
					if o.c != nil {
						claims++
						claimant = o.node
					}
				}
				if claims != 1 {
					t.Fatalf("key %d: %d claims, want exactly 1 (results %+v)", k, claims, pair)
				}
				for _, o := range pair {
					if o.c != nil {
						continue
					}
					m, ok := o.out.(map[string]any)
					if !o.hit || !ok || m["by"] != claimant || m["n"] != json.Number("12345678901234567890") {
						t.Fatalf("key %d: %s got hit=%v %#v, want the result committed by %s", k, o.node, o.hit, o.out, claimant)
					}
				}
			}
			a.idem.refreshCount()
			if n := a.idem.Len(); n != keys {
				t.Fatalf("Len = %d, want %d", n, keys)
			}
		})
	}
}

// A holder that dies (its store closed without Release) stops renewing; its
// claim is taken over once the lease lapses, by the database's clock, and
// the taker's result is the one stored.
func TestIdempotencyTakeOverAfterHolderDies(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	set := func(c *Config) { c.ClaimLease = time.Second }
	a, b, c := openNode(t, url, "a", set), openNode(t, url, "b", set), openNode(t, url, "c", set)
	ctx := ctxT(t)
	_, _, claim, err := a.idem.Begin(ctx, "k", "charge", "p1")
	if err != nil || claim == nil {
		t.Fatalf("first Begin: claim %v, %v", claim, err)
	}
	claimedAt := recordedAt(t, c, "k")
	a.Close() // a dies: no Release, no renewal
	_, hit, bc, err := b.idem.Begin(ctx, "k", "charge", "p2")
	if err != nil || hit || bc == nil {
		t.Fatalf("Begin after the holder died: hit %v claim %v err %v, want the claim", hit, bc, err)
	}
	if took := recordedAt(t, c, "k").Sub(claimedAt); took < time.Second {
		t.Fatalf("taken over %v after the claim, before its 1 s lease lapsed", took)
	}
	if err := bc.Commit(ctx, "by-b"); err != nil {
		t.Fatal(err)
	}
	out, hit, _, err := c.idem.Begin(ctx, "k", "charge", "p3")
	if err != nil || !hit || out != "by-b" {
		t.Fatalf("Begin after the taker committed = %v %v %v, want the hit by-b", out, hit, err)
	}
}

func recordedAt(t *testing.T, db *DB, key string) time.Time {
	t.Helper()
	var at time.Time
	if err := db.pool.QueryRow(ctxT(t), `SELECT recorded_at FROM car_idempotency WHERE key = $1`, key).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// A holder that renews keeps its claim past several leases: the waiter gets
// its result, not the claim.
func TestIdempotencyRenewalKeepsClaim(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	set := func(c *Config) { c.ClaimLease = time.Second }
	a, b := openNode(t, url, "a", set), openNode(t, url, "b", set)
	ctx := ctxT(t)
	_, _, claim, err := a.idem.Begin(ctx, "k", "charge", "p1")
	if err != nil || claim == nil {
		t.Fatalf("first Begin: %v", err)
	}
	res := beginAsync(ctx, b, "k", "p2")
	testwait.Eventually(t, eventualLimit, "three leases to pass on the database's clock", func() bool {
		var passed bool
		err := a.pool.QueryRow(ctx, `SELECT now() > recorded_at + interval '3 seconds' FROM car_idempotency WHERE key = 'k'`).Scan(&passed)
		return err == nil && passed
	})
	if err := claim.Commit(ctx, "by-a"); err != nil {
		t.Fatalf("Commit after renewals: %v", err)
	}
	r := <-res
	if r.err != nil || !r.hit || r.out != "by-a" {
		t.Fatalf("the waiter got %v hit=%v claim=%v err=%v, want the hit by-a", r.out, r.hit, r.c, r.err)
	}
}

// A holder whose claim was taken over is told so by Commit, which stores
// nothing: only the current holder's result is stored and acknowledged.
func TestIdempotencyCommitAfterTakeOverFails(t *testing.T) {
	t.Parallel()
	for _, takerCommitsFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("taker commits first ", takerCommitsFirst), func(t *testing.T) {
			url := pgtest.URL(t)
			set := func(c *Config) { c.ClaimLease = time.Second }
			a, b := openNode(t, url, "a", set), openNode(t, url, "b", set)
			ctx := ctxT(t)
			_, _, ac, err := a.idem.Begin(ctx, "k", "charge", "p1")
			if err != nil || ac == nil {
				t.Fatalf("first Begin: %v", err)
			}
			a.idem.noRenew.Store(true) // a is cut off from the database
			_, hit, bc, err := b.idem.Begin(ctx, "k", "charge", "p2")
			if err != nil || hit || bc == nil {
				t.Fatalf("Begin on b: hit %v err %v, want the claim", hit, err)
			}
			want := "runs it now"
			if takerCommitsFirst {
				if err := bc.Commit(ctx, "by-b"); err != nil {
					t.Fatal(err)
				}
				want = "stored its own result"
			}
			err = ac.Commit(ctx, "by-a")
			if !errors.Is(err, ErrClaimLost) || !strings.Contains(err.Error(), "daemon 'b'") || !strings.Contains(err.Error(), want) {
				t.Fatalf("Commit of a claim taken over = %v, want ErrClaimLost naming daemon 'b' and %q", err, want)
			}
			if !takerCommitsFirst {
				if err := bc.Commit(ctx, "by-b"); err != nil {
					t.Fatal(err)
				}
			}
			out, hit, _, err := a.idem.Begin(ctx, "k", "charge", "p3")
			if err != nil || !hit || out != "by-b" {
				t.Fatalf("Begin after both commits = %v %v %v, want the hit by-b", out, hit, err)
			}
		})
	}
}

// Release deletes the claim and wakes the waiters, on this daemon and on
// another; one of them claims the key.
func TestIdempotencyReleaseLetsWaiterClaim(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// Hour-long leases: the waiters re-check every six minutes, so only a
	// wake returns them within the test.
	set := func(c *Config) { c.ClaimLease = time.Hour }
	a, b := openNode(t, url, "a", set), openNode(t, url, "b", set)
	ctx := ctxT(t)
	_, _, claim, err := a.idem.Begin(ctx, "k", "charge", "p1")
	if err != nil || claim == nil {
		t.Fatalf("first Begin: %v", err)
	}
	onA, onB := beginAsync(ctx, a, "k", "p2"), beginAsync(ctx, b, "k", "p3")
	testwait.Eventually(t, eventualLimit, "both waiters to wait", func() bool { return waiting(a, "k") && waiting(b, "k") })
	claim.Release()
	var claims []store.Claim
	var hits int
	for range 2 {
		var r beginResult
		select { // the claimant's commit is what the other waits for
		case r = <-onA:
		case r = <-onB:
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.c != nil {
			claims = append(claims, r.c)
			if err := r.c.Commit(ctx, "second"); err != nil {
				t.Fatal(err)
			}
		} else if r.hit && r.out == "second" {
			hits++
		}
	}
	if len(claims) != 1 || hits != 1 {
		t.Fatalf("after Release: %d claims and %d hits, want one of each", len(claims), hits)
	}
}

// Invalidate deletes a rolled-back proposal's results, and only its own.
func TestIdempotencyInvalidate(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := openNode(t, url, "a")
	ctx := ctxT(t)
	for _, k := range []string{"k1", "k2"} {
		_, _, c, err := a.idem.Begin(ctx, k, "charge", "p1")
		if err != nil || c == nil {
			t.Fatalf("Begin %s: %v", k, err)
		}
		if err := c.Commit(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if out, hit, _, err := a.idem.Begin(ctx, "k1", "charge", "p9"); err != nil || !hit || out != nil {
		t.Fatalf("a stored null is not a hit of null: %v %v %v", out, hit, err)
	}
	if err := a.idem.Invalidate(ctx, []string{"k1", "k2"}, "p2"); err != nil {
		t.Fatal(err)
	}
	if _, hit, _, _ := a.idem.Begin(ctx, "k1", "charge", "p9"); !hit {
		t.Fatal("another proposal's rollback deleted p1's result")
	}
	if err := a.idem.Invalidate(ctx, []string{"k1", "k2"}, "p1"); err != nil {
		t.Fatal(err)
	}
	if n := a.idem.Len(); n != 0 {
		t.Fatalf("Len after the rollback = %d, want 0", n)
	}
	_, hit, c, err := a.idem.Begin(ctx, "k2", "charge", "p3")
	if err != nil || hit || c == nil {
		t.Fatalf("Begin after Invalidate: hit %v err %v, want a claim", hit, err)
	}
	c.Release()
	// The rows stay, free, keeping their epochs for the keys' next claims.
	rows, err := a.pool.Query(ctx, `SELECT key || ':' || epoch FROM car_idempotency WHERE NOT done AND token IS NULL AND output IS NULL ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	free, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(free, " ") != "k1:1 k2:2" {
		t.Fatalf("free rows after the rollback and a release = %v (%v), want k1:1 k2:2", free, err)
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM car_idempotency`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after the rollback and a release = %d (%v), want the 2 free ones", n, err)
	}
}

// While the database is stopped, Begin and Commit fail with ErrUnavailable
// and nothing is acknowledged; once it is back, the same store works again.
func TestIdempotencyUnavailableAndRecovery(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	a := openNode(t, url, "a", func(c *Config) { c.ConnectTimeout = time.Second })
	ctx := ctxT(t)
	_, _, held, err := a.idem.Begin(ctx, "held", "charge", "p1")
	if err != nil || held == nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	if _, _, _, err := a.idem.Begin(ctx, "k", "charge", "p1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Begin with the database stopped = %v, want ErrUnavailable", err)
	}
	if err := held.Commit(ctx, "lost"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Commit with the database stopped = %v, want ErrUnavailable", err)
	}
	srv.Start(t)
	ctx = ctxT(t) // the stop and start took their time
	var c store.Claim
	testwait.Eventually(t, eventualLimit, "Begin to work again", func() bool {
		_, _, c, err = a.idem.Begin(ctx, "k", "charge", "p1")
		return err == nil
	})
	if c == nil {
		t.Fatal("Begin after recovery did not claim a new key")
	}
	if err := c.Commit(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if out, hit, _, err := a.idem.Begin(ctx, "k", "charge", "p2"); err != nil || !hit || out != "ok" {
		t.Fatalf("hit after recovery = %v %v %v", out, hit, err)
	}
	// The held claim's row is either still a claim, or gone: a claim's
	// commit does not wait for its flush, so the database's stop may have
	// taken it. Either way the failed Commit stored nothing.
	var stored int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM car_idempotency WHERE key = 'held' AND done`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("a Commit that failed stored its result: %d results, err=%v", stored, err)
	}
}
