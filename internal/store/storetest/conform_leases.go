package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
)

// leaseTTL is long enough that no lease of these tests expires while it
// runs, except those given expireTTL.
const (
	leaseTTL  = time.Minute
	expireTTL = time.Millisecond
)

// testLeases: acquire bumps the epoch, a held lease refuses another
// acquire, renew keeps the epoch, release frees the lease at once and keeps
// the epoch, a stale epoch or another holder is refused, an expired lease
// is free, the epoch survives a restart, and racing acquires give one
// holder per epoch (across daemons on a shared store).
func testLeases(t *testing.T, open Open, opts Options) {
	if !has(opts, "Leases") {
		return
	}
	t.Run("Lifecycle", func(t *testing.T) {
		b := newBacking(t, open)
		d := b.open("node-a")
		l := d.Leases
		st, err := l.Status(ctx(t), "agent-1")
		if err != nil || st.Epoch != 0 || st.HeldAt(time.Now()) {
			t.Fatalf("Status of a lease never acquired = %+v, %v; want epoch 0, free", st, err)
		}
		a, err := l.Acquire(ctx(t), "agent-1", "alice", leaseTTL)
		if err != nil || a.Epoch != 1 || a.Holder != "alice" || !a.HeldAt(time.Now()) {
			t.Fatalf("first Acquire = %+v, %v; want alice at epoch 1", a, err)
		}
		got, err := l.Acquire(ctx(t), "agent-1", "bob", leaseTTL)
		if !errors.Is(err, store.ErrLeaseHeld) || got.Holder != "alice" || got.Epoch != 1 {
			t.Fatalf("Acquire of a held lease = %+v, %v; want ErrLeaseHeld naming alice at epoch 1", got, err)
		}
		r, err := l.Renew(ctx(t), "agent-1", "alice", 1, 2*leaseTTL)
		if err != nil || r.Epoch != 1 || !r.ExpiresAt.After(a.ExpiresAt) {
			t.Fatalf("Renew = %+v, %v; want epoch 1 kept, expiry after %v", r, err, a.ExpiresAt)
		}
		for _, bad := range []struct {
			holder string
			epoch  uint64
		}{{"bob", 1}, {"alice", 2}, {"alice", 0}} {
			if _, err := l.Renew(ctx(t), "agent-1", bad.holder, bad.epoch, leaseTTL); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("Renew by %s at epoch %d = %v; want ErrLeaseLost", bad.holder, bad.epoch, err)
			}
			if _, err := l.Release(ctx(t), "agent-1", bad.holder, bad.epoch); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("Release by %s at epoch %d = %v; want ErrLeaseLost", bad.holder, bad.epoch, err)
			}
		}
		rel, err := l.Release(ctx(t), "agent-1", "alice", 1)
		if err != nil || rel.Epoch != 1 || rel.HeldAt(time.Now()) {
			t.Fatalf("Release = %+v, %v; want free at epoch 1", rel, err)
		}
		if _, err := l.Release(ctx(t), "agent-1", "alice", 1); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("a second Release = %v; want ErrLeaseLost", err)
		}
		if _, err := l.Renew(ctx(t), "agent-1", "alice", 1, leaseTTL); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Renew after Release = %v; want ErrLeaseLost", err)
		}
		n, err := l.Acquire(ctx(t), "agent-1", "bob", leaseTTL)
		if err != nil || n.Epoch != 2 || n.Holder != "bob" {
			t.Fatalf("Acquire after Release = %+v, %v; want bob at epoch 2", n, err)
		}
		other, err := l.Acquire(ctx(t), "agent-2", "alice", leaseTTL)
		if err != nil || other.Epoch != 1 {
			t.Fatalf("Acquire of another agent's lease = %+v, %v; want epoch 1 (epochs are per agent id)", other, err)
		}
		d = b.restart(d)
		st, err = d.Leases.Status(ctx(t), "agent-1")
		if err != nil || st.Epoch != 2 || st.Holder != "bob" || !st.HeldAt(time.Now()) {
			t.Fatalf("after a restart, Status = %+v, %v; want bob holding epoch 2", st, err)
		}
		if _, err := d.Leases.Release(ctx(t), "agent-1", "bob", 2); err != nil {
			t.Fatal(err)
		}
		d = b.restart(d)
		n, err = d.Leases.Acquire(ctx(t), "agent-1", "carol", leaseTTL)
		if err != nil || n.Epoch != 3 {
			t.Fatalf("Acquire after a release and a restart = %+v, %v; want epoch 3 (never reused)", n, err)
		}
	})

	// An expired lease is free: another holder acquires it with the next
	// epoch, and the old holder can neither renew nor release it. The
	// wait is on the store's own Status, not on a sleep of ours.
	t.Run("Expiry", func(t *testing.T) {
		b := newBacking(t, open)
		l := b.open("node-a").Leases
		if _, err := l.Acquire(ctx(t), "agent-x", "alice", expireTTL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(suiteTimeout)
		var n store.Lease
		for {
			var err error
			n, err = l.Acquire(ctx(t), "agent-x", "bob", leaseTTL)
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
				t.Fatalf("Acquire after a 1ms lease: %v", err)
			}
		}
		if n.Epoch != 2 || n.Holder != "bob" {
			t.Fatalf("Acquire of an expired lease = %+v; want bob at epoch 2", n)
		}
		if _, err := l.Renew(ctx(t), "agent-x", "alice", 1, leaseTTL); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Renew by the expired holder = %v; want ErrLeaseLost", err)
		}
	})

	// Acquires that race, on one daemon or (shared store) two: each epoch
	// has exactly one holder, epochs are 1..n with none skipped or reused,
	// and a holder releases before the next can win.
	t.Run("RacingAcquires", func(t *testing.T) {
		b := newBacking(t, open)
		daemons := []*daemon{b.open("node-a")}
		if opts.Shared {
			daemons = append(daemons, b.open("node-b"))
		}
		const workers, wins = 8, 50
		var (
			mu     sync.Mutex
			owners = map[uint64]string{}
			wg     sync.WaitGroup
			errs   = make(chan error, workers)
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := daemons[w%len(daemons)].Leases
				holder := fmt.Sprintf("worker-%d", w)
				for {
					mu.Lock()
					done := len(owners) >= wins
					mu.Unlock()
					if done {
						return
					}
					got, err := l.Acquire(ctx(t), "raced", holder, leaseTTL)
					if errors.Is(err, store.ErrLeaseHeld) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					prev, dup := owners[got.Epoch]
					owners[got.Epoch] = holder
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("epoch %d was acquired by both %s and %s", got.Epoch, prev, holder)
						return
					}
					if _, err := l.Release(ctx(t), "raced", holder, got.Epoch); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for e := uint64(1); e <= uint64(len(owners)); e++ {
			if _, ok := owners[e]; !ok {
				t.Fatalf("epochs won: %d, but epoch %d has no holder (an epoch was skipped)", len(owners), e)
			}
		}
	})
}
