package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// feed records what a subscription is called with.
type feed struct {
	topic string
	ch    chan []byte
}

func subscribe(t *testing.T, b *bus, topic string) *feed {
	t.Helper()
	f := &feed{topic: topic, ch: make(chan []byte, 4096)}
	cancel := b.Subscribe(topic, func(p []byte) { f.ch <- p })
	t.Cleanup(cancel)
	return f
}

// next is the next call's payload (nil: a resync).
func (f *feed) next(t *testing.T) []byte {
	t.Helper()
	select {
	case p := <-f.ch:
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("topic %q: nothing delivered", f.topic)
		return nil
	}
}

func (f *feed) wantResync(t *testing.T) {
	t.Helper()
	if p := f.next(t); p != nil {
		t.Fatalf("topic %q: got %q, want a resync (nil)", f.topic, p)
	}
}

func (f *feed) want(t *testing.T, payload string) {
	t.Helper()
	p := f.next(t)
	if p == nil || string(p) != payload {
		t.Fatalf("topic %q: got %q (nil %v), want %q", f.topic, p, p == nil, payload)
	}
}

// A notification published on one daemon reaches the other's subscribers
// in order; topics do not cross, whatever their spelling.
func TestBusAcrossDaemonsInOrder(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	ctx := ctxT(t)
	long := strings.Repeat("x", 100) // longer than an identifier
	topics := []string{"jobs", "Jobs", `odd "topic"; DROP TABLE car_nodes; --`, long, long + "y", ""}
	feeds := make([]*feed, len(topics))
	for i, topic := range topics {
		feeds[i] = subscribe(t, b.bus, topic)
		feeds[i].wantResync(t) // listened to from here on
	}
	for i, topic := range topics {
		for n := range 50 {
			if err := a.bus.Publish(ctx, topic, []byte(fmt.Sprintf("%d/%d", i, n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, f := range feeds {
		for n := range 50 {
			f.want(t, fmt.Sprintf("%d/%d", i, n))
		}
	}
	if err := a.bus.Publish(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if p := feeds[0].next(t); p == nil || len(p) != 0 {
		t.Fatalf("an empty payload arrived as %q (nil %v), want empty and not nil", p, p == nil)
	}
	var n int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM car_nodes").Scan(&n); err != nil || n != 2 {
		t.Fatalf("car_nodes after a hostile topic: %d rows, %v", n, err)
	}
}

// NOTIFY payloads stop short of 8000 bytes: a larger one is refused with a
// clear error, the largest allowed one is delivered.
func TestBusPayloadLimit(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	ctx := ctxT(t)
	f := subscribe(t, a.bus, "big")
	f.wantResync(t)
	err := a.bus.Publish(ctx, "big", make([]byte, 8000))
	if !errors.Is(err, errPayloadTooLarge) || !strings.Contains(err.Error(), "publish an id") {
		t.Fatalf("an 8000-byte payload: %v, want a refusal that says what to do", err)
	}
	if err := a.bus.Publish(ctx, "big", []byte("a\x00b")); err == nil {
		t.Fatal("a payload with a NUL byte was accepted")
	}
	largest := strings.Repeat("é", maxPayload/2) + "z"
	if err := a.bus.Publish(ctx, "big", []byte(largest)); err != nil {
		t.Fatalf("a %d-byte payload: %v", len(largest), err)
	}
	f.want(t, largest)
}

// A subscriber that falls more than its queue behind loses the oldest
// payloads, and is told to resync before the next one it gets; the others
// arrive in order. Another subscription is not held up.
func TestBusSlowSubscriberResyncs(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	ctx := ctxT(t)
	gate := make(chan struct{})
	got := make(chan []byte, 2*busQueue)
	var once sync.Once
	cancel := a.bus.Subscribe("slow", func(p []byte) {
		got <- p
		if p != nil {
			once.Do(func() { <-gate }) // stuck on the first payload
		}
	})
	defer cancel()
	marker := subscribe(t, a.bus, "marker")
	marker.wantResync(t)
	if p := <-got; p != nil {
		t.Fatalf("first call %q, want the resync that says it is listened to", p)
	}
	total := busQueue + 100
	for n := 1; n <= total; n++ {
		if err := a.bus.Publish(ctx, "slow", []byte(strconv.Itoa(n))); err != nil {
			t.Fatal(err)
		}
	}
	// The connection delivers in commit order: once the marker is here,
	// every payload of "slow" has been queued.
	if err := a.bus.Publish(ctx, "marker", []byte("done")); err != nil {
		t.Fatal(err)
	}
	marker.want(t, "done")
	close(gate)
	if p := <-got; string(p) != "1" {
		t.Fatalf("first payload %q, want 1", p)
	}
	if p := <-got; p != nil {
		t.Fatalf("after falling behind: %q, want a resync", p)
	}
	first := -1
	for n := 0; ; n++ {
		p := <-got
		v, err := strconv.Atoi(string(p))
		if err != nil {
			t.Fatalf("payload %q", p)
		}
		if first < 0 {
			first = v
		} else if v != first+n {
			t.Fatalf("payload %d after %d: out of order", v, first+n-1)
		}
		if v == total {
			break
		}
	}
	if kept := total - first + 1; kept > busQueue || first <= 2 {
		t.Fatalf("kept payloads %d..%d: want at most %d, the oldest dropped", first, total, busQueue)
	}
}

// When the database goes away the listener reconnects with backoff, and
// every subscription is told to resync; notifications flow again.
func TestBusReconnectResyncs(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	a := openNode(t, url, "a")
	f := subscribe(t, a.bus, "t")
	f.wantResync(t)
	srv.Stop(t)
	testwait.Eventually(t, eventualLimit, "the listener notices the outage", func() bool {
		up, _ := a.bus.status()
		return !up
	})
	srv.Start(t)
	f.wantResync(t)
	if up, reconnects := a.bus.status(); !up || reconnects < 1 {
		t.Fatalf("after the restart: connected %v, reconnects %d", up, reconnects)
	}
	ctx := ctxT(t)
	testwait.Eventually(t, eventualLimit, "a publish succeeds after the restart", func() bool {
		return a.bus.Publish(ctx, "t", []byte("back")) == nil
	})
	f.want(t, "back")
}

// Cancel stops the calls, also when called from the subscriber itself.
func TestBusCancel(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	ctx := ctxT(t)
	var calls []string
	var mu sync.Mutex
	var cancel func()
	ready := make(chan struct{}, 1)
	cancel = a.bus.Subscribe("c", func(p []byte) {
		if p == nil {
			ready <- struct{}{}
			return
		}
		mu.Lock()
		calls = append(calls, string(p))
		mu.Unlock()
		cancel() // from within: must not deadlock
	})
	<-ready
	after := subscribe(t, a.bus, "c")
	after.wantResync(t)
	for _, p := range []string{"1", "2", "3"} {
		if err := a.bus.Publish(ctx, "c", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"1", "2", "3"} {
		after.want(t, p) // the other subscription of the topic goes on
	}
	if err := a.Close(); err != nil { // waits for every subscription's goroutine
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0] != "1" {
		t.Fatalf("calls after a cancel from within: %v, want [1]", calls)
	}
}
