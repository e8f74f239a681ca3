package storetest

import (
	"context"
	"fmt"
	"sync"
)

// MaxPayload is the largest payload Bus accepts: PostgreSQL's NOTIFY refuses
// payloads of 8,000 bytes or more, and the cluster's publishers promise to
// stay under it.
const MaxPayload = 7999

// queueBound is how many payloads one subscription holds undelivered before
// the oldest is dropped, as a listener that falls behind loses notifications.
const queueBound = 4096

// Bus is an in-process store.Bus for tests: every subscription to a topic,
// whichever daemon made it, receives every payload published on it, in
// publish order, on the subscription's own goroutine, as LISTEN/NOTIFY
// delivers to every listening daemon (the publisher's own included).
type Bus struct {
	mu   sync.Mutex
	subs map[string][]*subscription
	fail error // non-nil: Publish fails with it
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: make(map[string][]*subscription)} }

// Fail makes every Publish fail with err until it is called with nil, as a
// store that cannot be reached does.
func (b *Bus) Fail(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

// Publish hands payload to every subscription of topic.
func (b *Bus) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(payload) > MaxPayload {
		return fmt.Errorf("payload of %d bytes on %s is over the %d a notification may carry", len(payload), topic, MaxPayload)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	for _, s := range b.subs[topic] {
		s.push(append([]byte(nil), payload...))
	}
	return nil
}

// Subscribe calls fn for every payload published on topic from now on; the
// returned cancel stops the calls and waits for one in progress.
func (b *Bus) Subscribe(topic string, fn func(payload []byte)) (cancel func()) {
	s := &subscription{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	b.mu.Lock()
	b.subs[topic] = append(b.subs[topic], s)
	b.mu.Unlock()
	go s.run()
	return sync.OnceFunc(func() {
		b.mu.Lock()
		list := b.subs[topic]
		for i, x := range list {
			if x == s {
				b.subs[topic] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		b.mu.Unlock()
		close(s.stop)
		<-s.done
	})
}

// Dropped is how many payloads subscriptions of topic lost by falling behind.
func (b *Bus) Dropped(topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.subs[topic] {
		s.mu.Lock()
		n += s.dropped
		s.mu.Unlock()
	}
	return n
}

type subscription struct {
	fn   func([]byte)
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	queue   [][]byte
	dropped int
}

func (s *subscription) push(p []byte) {
	s.mu.Lock()
	if len(s.queue) == queueBound {
		s.queue = s.queue[1:]
		s.dropped++
	}
	s.queue = append(s.queue, p)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		var p []byte
		if len(s.queue) > 0 {
			p = s.queue[0]
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		if p != nil {
			select {
			case <-s.stop:
				return
			default:
			}
			s.fn(p)
			continue
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}
