package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Item is one delivered payload with its place in the feed.
type Item[T any] struct {
	Cursor  uint64 // 1, 2, 3… in push order, counting dropped items
	Dropped uint64 // items dropped just before this one
	Value   T
	size    int64 // Options.Size of Value, while queued
}

// Options bound a Queue. Zero values take the defaults noted.
type Options struct {
	Capacity     int           // undelivered items held before the oldest is dropped (256)
	WriteTimeout time.Duration // deadline of one send (30 s)
	// MaxBytes bounds the undelivered items' Size together: past it the
	// oldest are dropped, the newest kept however large. Zero, or a nil
	// Size: count only.
	MaxBytes int64
	Size     func(v any) int64 // what one pushed value weighs, called by Push outside the lock
	Total    *atomic.Int64     // nil, or where every queue sharing it adds its bytes (a daemon-wide figure)
}

// ErrClosed is Err after Close.
var ErrClosed = errors.New("fanout queue closed")

// SendFunc delivers one item. It must return once ctx is done.
type SendFunc[T any] func(ctx context.Context, it Item[T]) error

// Queue is one subscriber's feed.
type Queue[T any] struct {
	send     SendFunc[T]
	capacity int
	timeout  time.Duration
	maxBytes int64
	size     func(any) int64
	total    *atomic.Int64

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wake   chan struct{} // one pending signal: items were pushed
	done   chan struct{} // closed when the sender has returned

	mu     sync.Mutex
	items  []Item[T] // undelivered, oldest first
	bytes  int64     // size of items together
	pushed uint64    // cursor of the latest push
	err    error     // why delivery ended
}

// New starts a queue that delivers through send; Close must follow.
func New[T any](send SendFunc[T], opts Options) *Queue[T] {
	if opts.Capacity <= 0 {
		opts.Capacity = 256
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue[T]{
		send:     send,
		capacity: opts.Capacity,
		timeout:  opts.WriteTimeout,
		ctx:      ctx,
		maxBytes: opts.MaxBytes,
		size:     opts.Size,
		total:    opts.Total,
		cancel:   cancel,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	go q.run()
	return q
}

// Push queues v without blocking; when the queue is full, by count or by
// bytes, the oldest undelivered items are dropped. After delivery has ended
// it does nothing.
func (q *Queue[T]) Push(v T) {
	var size int64
	if q.size != nil && q.maxBytes > 0 {
		size = q.size(v)
	}
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		return
	}
	q.pushed++
	q.items = append(q.items, Item[T]{Cursor: q.pushed, Value: v, size: size})
	delta := size
	for len(q.items) > q.capacity || (q.maxBytes > 0 && q.bytes+delta > q.maxBytes && len(q.items) > 1) {
		delta -= q.items[0].size
		var zero Item[T]
		q.items[0] = zero // let the dropped value be collected
		q.items = q.items[1:]
	}
	q.addBytes(delta)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // the sender is already signalled
	}
}

// Done is closed when delivery has ended: after Close, or after a send
// failed or missed its deadline.
func (q *Queue[T]) Done() <-chan struct{} { return q.done }

// Err says why delivery ended: ErrClosed, or the failed send's error
// (wrapping context.DeadlineExceeded when the deadline passed). It is nil
// while the queue delivers.
func (q *Queue[T]) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Close stops delivery, abandoning undelivered items, and waits for the
// sender: a send in progress sees its context end.
func (q *Queue[T]) Close() {
	q.cancel()
	<-q.done
}

// run is the sender: it delivers items in cursor order until Close or a
// failed send.
func (q *Queue[T]) run() {
	defer close(q.done)
	var sent uint64 // cursor of the last item delivered
	for {
		it, ok := q.pop()
		if !ok {
			select {
			case <-q.wake:
				continue
			case <-q.ctx.Done():
				q.stop(ErrClosed)
				return
			}
		}
		if q.ctx.Err() != nil {
			q.stop(ErrClosed)
			return
		}
		it.Dropped = it.Cursor - sent - 1
		ctx, cancel := context.WithTimeout(q.ctx, q.timeout)
		err := q.send(ctx, it)
		cancel()
		if err != nil {
			// A send cut short by Close is no failure of the subscriber's;
			// any other error is, even when Close has come since.
			if errors.Is(err, context.Canceled) && q.ctx.Err() != nil {
				err = ErrClosed
			} else {
				err = fmt.Errorf("item %d not delivered; the subscriber is dropped: %w", it.Cursor, err)
			}
			q.stop(err)
			return
		}
		sent = it.Cursor
	}
}

func (q *Queue[T]) pop() (Item[T], bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return Item[T]{}, false
	}
	it := q.items[0]
	var zero Item[T]
	q.items[0] = zero
	q.items = q.items[1:]
	q.addBytes(-it.size)
	it.size = 0
	return it, true
}

// stop records why delivery ended and lets the undelivered items go.
func (q *Queue[T]) stop(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.err = err
	q.items = nil
	q.addBytes(-q.bytes)
}

// addBytes moves the queue's bytes, and the shared total; the caller holds
// q.mu.
func (q *Queue[T]) addBytes(n int64) {
	q.bytes += n
	if q.total != nil && n != 0 {
		q.total.Add(n)
	}
}

// Bytes is the Size of the undelivered items together.
func (q *Queue[T]) Bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}
