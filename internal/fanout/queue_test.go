package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// performance assertion.
const testTimeout = 10 * time.Second

// recorder is a send function that hands every item to the test.
type recorder struct {
	got chan Item[int]
}

func newRecorder(n int) *recorder { return &recorder{got: make(chan Item[int], n)} }

func (r *recorder) send(_ context.Context, it Item[int]) error {
	r.got <- it
	return nil
}

// next returns the next delivered item, failing after testTimeout.
func (r *recorder) next(t *testing.T) Item[int] {
	t.Helper()
	select {
	case it := <-r.got:
		return it
	case <-time.After(testTimeout):
		t.Fatal("no item delivered")
		return Item[int]{}
	}
}

// stuckSender blocks every send until release is closed, telling the test
// each item it has started on.
type stuckSender struct {
	started chan Item[int]
	release chan struct{}
}

func newStuckSender() *stuckSender {
	return &stuckSender{started: make(chan Item[int], 1024), release: make(chan struct{})}
}

func (s *stuckSender) send(ctx context.Context, it Item[int]) error {
	s.started <- it
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("%s did not happen", what)
	}
}

func TestItemsArriveInPushOrderWithContiguousCursors(t *testing.T) {
	r := newRecorder(100)
	q := New(r.send, Options{Capacity: 100})
	defer q.Close()
	for i := range 100 {
		q.Push(i * 10)
	}
	for i := range 100 {
		it := r.next(t)
		if it.Cursor != uint64(i+1) || it.Dropped != 0 || it.Value != i*10 {
			t.Fatalf("item %d: got %+v", i, it)
		}
	}
}

func TestPushNeverBlocksOnAStuckSubscriber(t *testing.T) {
	s := newStuckSender()
	q := New(s.send, Options{Capacity: 4, WriteTimeout: time.Hour})
	defer q.Close()
	q.Push(0)
	<-s.started // the sender holds item 1 and cannot finish it
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for i := 1; i <= 1000; i++ {
			q.Push(i)
		}
	}()
	waitClosed(t, pushed, "1000 pushes behind a stuck send")
	if err := q.Err(); err != nil {
		t.Fatalf("a stuck send ended delivery before its deadline: %v", err)
	}
	close(s.release)
}

func TestDropsTheOldestAndReportsTheGap(t *testing.T) {
	s := newStuckSender()
	q := New(s.send, Options{Capacity: 4, WriteTimeout: time.Hour})
	defer q.Close()
	q.Push(1)
	if it := <-s.started; it.Cursor != 1 || it.Dropped != 0 {
		t.Fatalf("first item %+v", it)
	}
	for v := 2; v <= 10; v++ {
		q.Push(v) // 2..6 are dropped: only the latest 4 (7..10) stay queued
	}
	close(s.release)
	want := []Item[int]{{Cursor: 7, Dropped: 5, Value: 7}, {Cursor: 8, Value: 8}, {Cursor: 9, Value: 9}, {Cursor: 10, Value: 10}}
	for _, w := range want {
		select {
		case it := <-s.started:
			if it != w {
				t.Fatalf("want %+v, got %+v", w, it)
			}
		case <-time.After(testTimeout):
			t.Fatalf("item %d not delivered", w.Cursor)
		}
	}
	// After the gap, delivery goes on contiguously.
	q.Push(11)
	if it := <-s.started; it != (Item[int]{Cursor: 11, Value: 11}) {
		t.Fatalf("after the gap: %+v", it)
	}
}

func TestASendThatMissesItsDeadlineEndsDelivery(t *testing.T) {
	hadDeadline := make(chan bool, 1)
	sends := make(chan struct{}, 10)
	send := func(ctx context.Context, it Item[int]) error {
		sends <- struct{}{}
		_, ok := ctx.Deadline()
		hadDeadline <- ok
		<-ctx.Done() // a peer that never takes the write
		return ctx.Err()
	}
	q := New(send, Options{WriteTimeout: time.Millisecond})
	defer q.Close()
	q.Push(1)
	waitClosed(t, q.Done(), "the end of delivery after a missed deadline")
	if !<-hadDeadline {
		t.Fatal("the send's context had no deadline")
	}
	if err := q.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want a deadline error", err)
	}
	q.Push(2)
	q.Close()
	if n := len(sends); n != 1 {
		t.Fatalf("%d sends; a dropped subscriber must get no more", n)
	}
}

func TestAFailedSendEndsDelivery(t *testing.T) {
	broken := errors.New("connection reset")
	r := newRecorder(10)
	send := func(ctx context.Context, it Item[int]) error {
		if it.Value == 2 {
			return broken
		}
		return r.send(ctx, it)
	}
	q := New(send, Options{})
	defer q.Close()
	q.Push(1)
	q.Push(2)
	q.Push(3)
	waitClosed(t, q.Done(), "the end of delivery after a failed send")
	if err := q.Err(); !errors.Is(err, broken) {
		t.Fatalf("Err = %v, want %v", err, broken)
	}
	if it := r.next(t); it.Value != 1 || len(r.got) != 0 {
		t.Fatalf("delivered %+v and %d more; want only item 1", it, len(r.got))
	}
}

func TestCloseStopsTheSenderAndWaitsForIt(t *testing.T) {
	var mu sync.Mutex
	returned := false
	started := make(chan struct{})
	send := func(ctx context.Context, _ Item[int]) error {
		close(started)
		<-ctx.Done()
		mu.Lock()
		returned = true
		mu.Unlock()
		return ctx.Err()
	}
	q := New(send, Options{WriteTimeout: time.Hour})
	q.Push(1)
	<-started
	q.Close()
	mu.Lock()
	defer mu.Unlock()
	if !returned {
		t.Fatal("Close returned before the send in progress did")
	}
	if err := q.Err(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Err after Close = %v", err)
	}
	q.Push(2) // a no-op, not a panic
	q.Close() // idempotent
}

func TestConcurrentPushesKeepEachProducersOrder(t *testing.T) {
	const producers, each = 16, 500
	r := newRecorder(producers * each)
	q := New(r.send, Options{Capacity: producers * each})
	defer q.Close()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				q.Push(p*each + i)
			}
		})
	}
	wg.Wait()
	last := make(map[int]int) // producer → last value seen
	for n := range producers * each {
		it := r.next(t)
		if it.Cursor != uint64(n+1) || it.Dropped != 0 {
			t.Fatalf("item %d: %+v", n, it)
		}
		p := it.Value / each
		if prev, ok := last[p]; ok && it.Value <= prev {
			t.Fatalf("producer %d: %d after %d", p, it.Value, prev)
		}
		last[p] = it.Value
	}
}

func TestConcurrentPushesPastCapacityAccountForEveryItem(t *testing.T) {
	const producers, each = 8, 500
	r := newRecorder(producers * each)
	q := New(r.send, Options{Capacity: 8})
	defer q.Close()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for i := range each {
				q.Push(i)
			}
		})
	}
	wg.Wait()
	// The newest item is never dropped, so delivery reaches it; every
	// cursor before it is either delivered or counted as dropped.
	var prev, delivered, dropped uint64
	for prev < producers*each {
		it := r.next(t)
		if it.Cursor != prev+it.Dropped+1 {
			t.Fatalf("cursor %d after %d reports %d dropped", it.Cursor, prev, it.Dropped)
		}
		prev = it.Cursor
		delivered++
		dropped += it.Dropped
	}
	if delivered+dropped != producers*each {
		t.Fatalf("%d delivered + %d dropped != %d pushed", delivered, dropped, producers*each)
	}
}

func TestDropsTheOldestPastMaxBytes(t *testing.T) {
	s := newStuckSender()
	var total atomic.Int64
	q := New(s.send, Options{Capacity: 100, WriteTimeout: time.Hour, MaxBytes: 10, Size: func(v any) int64 { return int64(v.(int)) }, Total: &total})
	defer q.Close()
	q.Push(1)
	<-s.started // 1 is being sent: it no longer counts
	for _, v := range []int{4, 4, 4, 2} {
		q.Push(v) // the first 4 goes when the third comes (12 > 10)
	}
	if got := q.Bytes(); got != 4+4+2 || total.Load() != got {
		t.Fatalf("queued bytes %d (shared total %d), want 10", got, total.Load())
	}
	q.Push(50) // alone past the bound: everything older goes, it stays
	if got := q.Bytes(); got != 50 {
		t.Fatalf("queued bytes %d, want 50", got)
	}
	close(s.release)
	if it := <-s.started; it != (Item[int]{Cursor: 6, Dropped: 4, Value: 50}) {
		t.Fatalf("after the drops: %+v", it)
	}
	if got := q.Bytes(); got != 0 || total.Load() != 0 {
		t.Fatalf("queued bytes %d (shared total %d) after delivery, want 0", got, total.Load())
	}
}
