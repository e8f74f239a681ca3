package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/parslee-ai/car-server/internal/store"
)

// begun is what one Begin returned.
type begun struct {
	out   any
	hit   bool
	claim store.Claim
	err   error
}

func begin(t *testing.T, idem store.Idempotency, key, proposal string) begun {
	t.Helper()
	out, hit, c, err := idem.Begin(ctx(t), key, "charge", proposal)
	return begun{out, hit, c, err}
}

// miss begins key and wants a claim.
func miss(t *testing.T, idem store.Idempotency, key, proposal string) store.Claim {
	t.Helper()
	r := begin(t, idem, key, proposal)
	if r.err != nil || r.hit || r.claim == nil {
		t.Fatalf("Begin(%s) = hit %v claim %v err %v; want a claim", key, r.hit, r.claim, r.err)
	}
	return r.claim
}

// hit begins key and wants the stored result want.
func hit(t *testing.T, idem store.Idempotency, key string, want any) {
	t.Helper()
	r := begin(t, idem, key, "p-probe")
	if r.err != nil || !r.hit || !reflect.DeepEqual(r.out, want) {
		t.Fatalf("Begin(%s) = %#v hit %v err %v; want the hit %#v", key, r.out, r.hit, r.err, want)
	}
	if r.claim != nil {
		t.Fatalf("Begin(%s) hit and also returned a claim", key)
	}
}

func commit(t *testing.T, c store.Claim, output any) {
	t.Helper()
	if err := c.Commit(ctx(t), output); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func testIdempotency(t *testing.T, open Open, opts Options) {
	t.Run("ClaimCommitHitReleaseRollback", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		idem := d.Idempotency
		if n := idem.Len(); n != 0 {
			t.Fatalf("an empty cache has Len %d", n)
		}
		out := value(t, `{"charged":12.50,"ids":["a",1],"ok":true,"none":null}`)
		held := miss(t, idem, "k1", "p1")
		if got, ok, err := idem.Result(ctx(t), "k1"); err != nil || ok {
			t.Fatalf("Result of a key only claimed = %#v %v %v; want no result", got, ok, err)
		}
		commit(t, held, out)
		hit(t, idem, "k1", out)
		if got, ok, err := idem.Result(ctx(t), "k1"); err != nil || !ok || !reflect.DeepEqual(got, out) {
			t.Fatalf("Result(k1) = %#v %v %v; want the committed %#v", got, ok, err, out)
		}
		if got, ok, err := idem.Result(ctx(t), "never"); err != nil || ok {
			t.Fatalf("Result of a key never claimed = %#v %v %v; want no result", got, ok, err)
		}
		if n := idem.Len(); n != 1 {
			t.Fatalf("Len after one commit: %d", n)
		}

		// A released claim leaves no result: the next Begin claims again.
		miss(t, idem, "k2", "p1").Release()
		c := miss(t, idem, "k2", "p1")
		commit(t, c, "second")
		hit(t, idem, "k2", "second")

		// The rollback of p1 takes its results away.
		if err := idem.Invalidate(ctx(t), []string{"k1", "k2"}, "p1"); err != nil {
			t.Fatal(err)
		}
		if n := idem.Len(); n != 0 {
			t.Fatalf("Len after the rollback: %d", n)
		}
		miss(t, idem, "k1", "p2").Release()
		if err := idem.Invalidate(ctx(t), nil, "p1"); err != nil {
			t.Fatalf("Invalidate of no keys: %v", err)
		}

		// A rollback of another proposal.
		commit(t, miss(t, idem, "k3", "p3"), "p3's")
		if err := idem.Invalidate(ctx(t), []string{"k3"}, "p-other"); err != nil {
			t.Fatal(err)
		}
		hit(t, idem, "k3", "p3's")

		commit(t, miss(t, idem, "k4", "p4"), value(t, `[1,2,3]`))
		d = b.restart(d)
		hit(t, d.Idempotency, "k4", value(t, `[1,2,3]`))
	})

	// A second Begin of a key while its claim is held: it waits for the
	// holder, then gets the result (after a Commit) or the claim (after a
	// Release). With LocalClaims it gets its own claim at once.
	t.Run("SecondClaimerWhileHeld", func(t *testing.T) {
		b := newBacking(t, open)
		idem := b.open("node-a").Idempotency
		for _, release := range []bool{false, true} {
			key := fmt.Sprintf("held-%v", release)
			holder := miss(t, idem, key, "p1")
			second := make(chan begun, 1)
			go func() { second <- begin(t, idem, key, "p2") }()
			var r begun
			if opts.LocalClaims {
				r = <-second
				if r.err != nil || r.hit || r.claim == nil {
					t.Fatalf("with local claims the second Begin = hit %v claim %v err %v; want its own claim", r.hit, r.claim, r.err)
				}
			}
			if release {
				holder.Release()
			} else if opts.LocalClaims {
				// The second claim superseded the holder's.
				if err := holder.Commit(ctx(t), "holder's"); !errors.Is(err, store.ErrSuperseded) {
					t.Fatalf("the first claim's Commit after a second claim = %v; want store.ErrSuperseded", err)
				}
			} else {
				commit(t, holder, "holder's")
			}
			if !opts.LocalClaims {
				r = <-second
				switch {
				case r.err != nil:
					t.Fatalf("the waiting Begin: %v", r.err)
				case release && (r.hit || r.claim == nil):
					t.Fatalf("after the holder's Release the waiter got hit %v claim %v; want the claim", r.hit, r.claim)
				case !release && (!r.hit || !reflect.DeepEqual(r.out, "holder's")):
					t.Fatalf("after the holder's Commit the waiter got %#v hit %v; want the holder's result", r.out, r.hit)
				}
			}
			if r.claim != nil {
				commit(t, r.claim, "second's")
			}
			want := "holder's"
			if release || opts.LocalClaims {
				want = "second's"
			}
			hit(t, idem, key, want)
		}
	})

	// Claimers of one key that race, each committing its own result: every
	// claim has an epoch of its own, and exactly one commits, the latest
	// claim's (with exclusive claims there is one claim); every older
	// claim's Commit is refused as superseded, and every hit reads the one
	// result committed.
	t.Run("RacingClaimersOfOneKey", func(t *testing.T) {
		b := newBacking(t, open)
		idem := b.open("node-a").Idempotency
		got := make([]begun, racers)
		epochs := make([]uint64, racers)
		race(racers, func(i int) {
			r := begin(t, idem, "k", fmt.Sprintf("p%d", i))
			if r.err == nil && r.claim != nil {
				epochs[i] = r.claim.Epoch()
				r.err = r.claim.Commit(ctx(t), fmt.Sprintf("result %d", i))
				r.out = fmt.Sprintf("result %d", i)
			}
			got[i] = r
		})
		seen := map[uint64]int{}
		var committed []int
		var latest uint64
		for i, r := range got {
			switch {
			case r.claim == nil && r.err != nil:
				t.Fatalf("claimer %d: %v", i, r.err)
			case r.claim == nil:
				continue
			case r.err == nil:
				committed = append(committed, i)
			case !errors.Is(r.err, store.ErrSuperseded):
				t.Fatalf("claimer %d (epoch %d): Commit = %v; want success or store.ErrSuperseded", i, epochs[i], r.err)
			}
			if j, dup := seen[epochs[i]]; dup || epochs[i] == 0 {
				t.Fatalf("claimers %d and %d both hold epoch %d; want a nonzero epoch each", j, i, epochs[i])
			}
			seen[epochs[i]] = i
			latest = max(latest, epochs[i])
		}
		if len(committed) != 1 || (!opts.LocalClaims && len(seen) != 1) {
			t.Fatalf("%d claims of %d claimers, %d committed; want exactly one commit", len(seen), racers, len(committed))
		}
		winner := committed[0]
		if epochs[winner] != latest {
			t.Fatalf("claimer %d committed at epoch %d, but epoch %d was taken after it; the later claim should win", winner, epochs[winner], latest)
		}
		for e := uint64(1); e <= latest; e++ {
			if _, ok := seen[e]; !ok {
				t.Fatalf("epochs %v skip %d; a fresh store's claims of a key number 1, 2, 3...", seen, e)
			}
		}
		for i, r := range got {
			if r.hit && r.out != got[winner].out {
				t.Fatalf("claimer %d got %#v, not the one committed (%#v)", i, r.out, got[winner].out)
			}
		}
		hit(t, idem, "k", got[winner].out)
		if n := idem.Len(); n != 1 {
			t.Fatalf("Len after the race: %d, want 1", n)
		}
	})

	// A key's epochs only grow, across a release, a rollback and a
	// restart, and never repeat; another key has its own. A fresh store's
	// first epochs of a key count 1, 2, 3...; after a restart a store may
	// jump ahead (the file store starts a new range).
	t.Run("EpochsNeverRepeat", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		var last uint64
		next := func(c store.Claim, exactly bool, what string) store.Claim {
			t.Helper()
			e := c.Epoch()
			if e <= last || (exactly && e != last+1) {
				t.Fatalf("%s: epoch %d after %d; want %s", what, e, last, map[bool]string{true: "the next one", false: "a higher one"}[exactly])
			}
			last = e
			return c
		}
		next(miss(t, d.Idempotency, "k", "p1"), true, "the first claim").Release()
		if e := miss(t, d.Idempotency, "other", "p1"); e.Epoch() != 1 {
			t.Fatalf("another key's first claim has epoch %d, want 1", e.Epoch())
		} else {
			e.Release()
		}
		commit(t, next(miss(t, d.Idempotency, "k", "p1"), true, "a claim after a release"), "first")
		if err := d.Idempotency.Invalidate(ctx(t), []string{"k"}, "p1"); err != nil {
			t.Fatal(err)
		}
		next(miss(t, d.Idempotency, "k", "p2"), true, "a claim after a rollback").Release()
		d = b.restart(d)
		next(miss(t, d.Idempotency, "k", "p3"), false, "a claim after a restart following a release")
		died := d
		d = b.restart(d) // the claim is left held by a daemon that is gone
		if opts.LapseClaim != nil {
			opts.LapseClaim(t, died.Store, "k")
		}
		commit(t, next(miss(t, d.Idempotency, "k", "p4"), false, "a claim after its holder died"), "fifth")
		hit(t, d.Idempotency, "k", "fifth")
		d = b.restart(d)
		if err := d.Idempotency.Invalidate(ctx(t), []string{"k"}, "p4"); err != nil {
			t.Fatal(err)
		}
		next(miss(t, d.Idempotency, "k", "p5"), false, "a claim after a restart and a rollback").Release()
	})

	// A holder stalls past its lease; a newer claim of its key is taken
	// (a take-over on a shared store, a second Begin with local claims) and
	// commits. The stalled holder's Commit is then refused as superseded
	// and the newer result stands.
	t.Run("SupersededCommitIsRefused", func(t *testing.T) {
		b := newBacking(t, open)
		a := b.open("node-a")
		taker := a
		if opts.Shared {
			taker = b.open("node-b")
		}
		for _, takerFirst := range []bool{true, false} {
			key := fmt.Sprintf("k-%v", takerFirst)
			stalled := miss(t, a.Idempotency, key, "p1")
			if !opts.LocalClaims {
				if opts.LapseClaim == nil {
					t.Fatal("a backend with exclusive claims needs Options.LapseClaim")
				}
				opts.LapseClaim(t, a.Store, key)
			}
			newer := miss(t, taker.Idempotency, key, "p2")
			if newer.Epoch() <= stalled.Epoch() {
				t.Fatalf("the newer claim has epoch %d, the stalled one %d; want a higher one", newer.Epoch(), stalled.Epoch())
			}
			if takerFirst {
				commit(t, newer, "newer")
			}
			if err := stalled.Commit(ctx(t), "stalled"); !errors.Is(err, store.ErrSuperseded) {
				t.Fatalf("the stalled claim's Commit = %v; want store.ErrSuperseded", err)
			}
			if !takerFirst {
				commit(t, newer, "newer")
			}
			hit(t, a.Idempotency, key, "newer")
			hit(t, taker.Idempotency, key, "newer")
		}
	})

	if !opts.Shared {
		return
	}
	// Waiters on two daemons race to take over a claim that lapsed: exactly
	// one wins, at the next epoch, and every other gets its result; the
	// stalled holder's Commit is then refused.
	t.Run("RacingTakeOvers", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a"), b.open("node-b")
		stalled := miss(t, a.Idempotency, "k", "p0")
		opts.LapseClaim(t, a.Store, "k")
		got := make([]begun, racers)
		race(racers, func(i int) {
			idem := a.Idempotency
			if i%2 == 1 {
				idem = other.Idempotency
			}
			r := begin(t, idem, "k", fmt.Sprintf("p%d", i+1))
			if r.err == nil && r.claim != nil {
				r.err = r.claim.Commit(ctx(t), fmt.Sprintf("result %d", i))
				r.out = fmt.Sprintf("result %d", i)
			}
			got[i] = r
		})
		var winners []int
		for i, r := range got {
			if r.err != nil {
				t.Fatalf("waiter %d: %v", i, r.err)
			}
			if r.claim != nil {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d waiters took the lapsed claim over; want exactly one", len(winners))
		}
		w := got[winners[0]]
		if e := w.claim.Epoch(); e != stalled.Epoch()+1 {
			t.Fatalf("the take-over has epoch %d, the stalled claim %d; want the next one", e, stalled.Epoch())
		}
		for i, r := range got {
			if r.claim == nil && (!r.hit || r.out != w.out) {
				t.Fatalf("waiter %d got %#v hit %v; want the winner's %#v", i, r.out, r.hit, w.out)
			}
		}
		if err := stalled.Commit(ctx(t), "stalled"); !errors.Is(err, store.ErrSuperseded) {
			t.Fatalf("the stalled holder's Commit = %v; want store.ErrSuperseded", err)
		}
		hit(t, other.Idempotency, "k", w.out)
	})

	// Two daemons claim one key: one dispatches, the other gets its result.
	t.Run("AcrossDaemons", func(t *testing.T) {
		b := newBacking(t, open)
		a, other := b.open("node-a").Idempotency, b.open("node-b").Idempotency
		holder := miss(t, a, "k", "p1")
		second := make(chan begun, 1)
		go func() { second <- begin(t, other, "k", "p2") }()
		commit(t, holder, "node-a's")
		r := <-second
		if r.err != nil || !r.hit || !reflect.DeepEqual(r.out, "node-a's") {
			t.Fatalf("node-b's Begin = %#v hit %v err %v; want node-a's result", r.out, r.hit, r.err)
		}
	})
}
