package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// One PublishEach reaches another daemon's subscribers as one notification
// per payload, in order; a payload NOTIFY cannot carry refuses the call and
// nothing of it is delivered.
func TestBusPublishEachAcrossDaemonsInOrder(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	f := subscribe(t, b.bus, "jobs")
	f.wantResync(t)
	payloads := make([]string, 300)
	for i := range payloads {
		payloads[i] = fmt.Sprintf("job-%d", i)
	}
	if err := a.bus.PublishEach(ctx, "jobs", payloads); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		f.want(t, p)
	}
	err := a.bus.PublishEach(ctx, "jobs", []string{"fits", strings.Repeat("x", 8000)})
	if !errors.Is(err, errPayloadTooLarge) {
		t.Fatalf("PublishEach with a payload too large: %v, want %v", err, errPayloadTooLarge)
	}
	if err := a.bus.Publish(ctx, "jobs", []byte("marker")); err != nil {
		t.Fatal(err)
	}
	f.want(t, "marker") // not "fits": the refused call sent nothing
}

// A burst of commits on one daemon, published in batches, wakes every
// waiter on another daemon with its result. The leases are long, so the
// waiters' re-check (a tenth of the lease) comes after the test's deadline:
// only the notifications return them in time.
func TestIdempotencyBurstOfCommitsWakesWaitersElsewhere(t *testing.T) {
	url := pgtest.URL(t)
	set := func(c *Config) { c.ClaimLease = time.Hour }
	a, b := openNode(t, url, "a", set), openNode(t, url, "b", set)
	ctx := ctxT(t)
	const keys = 300
	claims := make([]interface {
		Commit(context.Context, any) error
	}, keys)
	for k := range keys {
		_, _, c, err := a.idem.Begin(ctx, fmt.Sprint("key-", k), "charge", "p1")
		if err != nil || c == nil {
			t.Fatalf("claim key %d: %v %v", k, c, err)
		}
		claims[k] = c
	}
	waiters := make([]<-chan beginResult, keys)
	for k := range keys {
		waiters[k] = beginAsync(ctx, b, fmt.Sprint("key-", k), "p2")
	}
	testwait.Eventually(t, eventualLimit, "every waiter on b to wait", func() bool {
		for k := range keys {
			if !waiting(b, fmt.Sprint("key-", k)) {
				return false
			}
		}
		return true
	})
	var wg sync.WaitGroup
	errs := make([]error, keys)
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = claims[k].Commit(ctx, fmt.Sprint("result-", k))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for k, ch := range waiters {
		r := <-ch
		if r.err != nil || !r.hit || r.c != nil || r.out != fmt.Sprint("result-", k) {
			t.Fatalf("waiter for key %d: out %v hit %v claim %v err %v, want the hit result-%d", k, r.out, r.hit, r.c, r.err, k)
		}
	}
}
