package journal

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// heldWrites holds every write of j until the test lets it go, and reports
// each write's record count on writes and the queue's length after each
// append on queued. After a write that answered several appenders, the
// flusher gathers for gather. When the test ends, writes pass and nothing
// is reported: a failed test still closes its journal.
type heldWrites struct {
	writes  chan int
	release chan struct{}

	mu      sync.Mutex
	depth   int           // the queue's length after the last append
	changed chan struct{} // told, without blocking, when depth changes
}

// openHeld opens a journal at path whose writes are held; it is closed
// when the test ends.
func openHeld(t *testing.T, path string, gather time.Duration) (*Journal, *heldWrites) {
	t.Helper()
	j, _ := mustOpen(t, path)
	t.Cleanup(func() { j.Close() })
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) }) // runs first: the holds let go, then Close
	h := &heldWrites{writes: make(chan int), release: make(chan struct{}), changed: make(chan struct{}, 1)}
	j.mu.Lock()
	j.writing = func(n int) {
		select {
		case h.writes <- n:
		case <-ended:
			return
		}
		select {
		case <-h.release:
		case <-ended:
		}
	}
	j.queued = func(n int) { // under j.mu: it must not block
		h.mu.Lock()
		h.depth = n
		h.mu.Unlock()
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	j.gatherFor = func(time.Duration) time.Duration { return gather }
	j.mu.Unlock()
	return j, h
}

// next waits for the next write and returns its record count.
func (h *heldWrites) next(t *testing.T) int {
	t.Helper()
	return wait(t, h.writes, "the next write")
}

// awaitQueued waits until n records are queued.
func (h *heldWrites) awaitQueued(t *testing.T, n int) {
	t.Helper()
	for {
		h.mu.Lock()
		depth := h.depth
		h.mu.Unlock()
		if depth >= n {
			return
		}
		wait(t, h.changed, fmt.Sprintf("%d queued records", n))
	}
}

// answerAPair makes a write that answers two appenders, a and b, at once:
// a first record is written alone while they queue behind it. It returns
// once both have their answer, with the flusher gathering after that write.
func (h *heldWrites) answerAPair(t *testing.T, j *Journal) {
	t.Helper()
	first := make(chan error, 1)
	go func() { first <- j.Append(rec("first", "put", 0)) }()
	h.next(t)
	pair := make(chan error, 2)
	for _, k := range []string{"a", "b"} {
		go func() { pair <- j.Append(rec(k, "put", 1)) }()
	}
	h.awaitQueued(t, 2)
	h.release <- struct{}{}
	if n := h.next(t); n != 2 {
		t.Fatalf("second write: %d records, want a and b", n)
	}
	h.release <- struct{}{}
	for _, ch := range []chan error{first, pair, pair} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendersReleasedTogetherShareTheNextWrite(t *testing.T) {
	j, h := openHeld(t, filepath.Join(t.TempDir(), "j.jsonl"), time.Hour) // gather until every released appender is back
	const appenders = 8

	first := make(chan error, 1)
	go func() { first <- j.Append(rec("first", "put", 0)) }()
	if n := h.next(t); n != 1 {
		t.Fatalf("first write: %d records, want 1", n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*appenders)
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 {
				if err := j.Append(rec(fmt.Sprintf("w%d-%d", w, i), "put", i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	h.awaitQueued(t, appenders) // every first append waits behind the held write
	h.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := h.next(t); n != appenders {
		t.Fatalf("second write: %d records, want the %d queued behind the first", n, appenders)
	}
	h.release <- struct{}{}
	// The eight are answered together; each appends again at once, and the
	// flusher waits for all of them rather than writing the first alone.
	if n := h.next(t); n != appenders {
		t.Fatalf("third write: %d records, want all %d appenders released by the second", n, appenders)
	}
	h.release <- struct{}{}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestAppendersThatDoNotComeBackAreNotWaitedForLonger(t *testing.T) {
	j, h := openHeld(t, filepath.Join(t.TempDir(), "j.jsonl"), 0) // the gathering ends at once
	h.answerAPair(t, j)
	// Only one of the two appends again: it is written without the other.
	again := make(chan error, 1)
	go func() { again <- j.Append(rec("a", "put", 2)) }()
	if n := h.next(t); n != 1 {
		t.Fatalf("third write: %d records, want 1", n)
	}
	h.release <- struct{}{}
	if err := <-again; err != nil {
		t.Fatal(err)
	}
}

func TestCloseWhileGatheringWritesWhatIsQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, h := openHeld(t, path, time.Hour)
	h.answerAPair(t, j)
	// The flusher now waits an hour for two appenders; one comes back, then
	// the journal closes.
	again := make(chan error, 1)
	go func() { again <- j.Append(rec("a", "put", 2)) }()
	h.awaitQueued(t, 1)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		j.Close()
	}()
	if n := h.next(t); n != 1 {
		t.Fatalf("write on close: %d records, want 1", n)
	}
	h.release <- struct{}{}
	wait(t, closed, "Close, while the flusher gathers")
	if err := <-again; err != nil {
		t.Fatal(err)
	}
	j, _ = mustOpen(t, path)
	defer j.Close()
	if got, ok := j.Get("a"); !ok || string(got) != string(rec("a", "put", 2)) {
		t.Fatalf("after reopening, a is %q", got)
	}
}
