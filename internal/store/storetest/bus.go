package storetest

import (
	"context"
	"sync"

	"github.com/parslee-ai/car-server/internal/store"
)

// Bus is an in-process store.Bus: every subscriber of a topic is called with
// every payload published on it after it subscribed, in publish order, on
// one goroutine per subscription.
type Bus struct {
	mu   sync.Mutex
	subs map[string][]*busSub
}

var _ store.Bus = (*Bus)(nil)

// busSub is one Subscribe: its queue and the goroutine that drains it.
type busSub struct {
	fn      func([]byte)
	mu      sync.Mutex
	queue   [][]byte
	wake    chan struct{} // one pending signal: the queue grew
	stop    chan struct{}
	stopped chan struct{}
}

// NewBus returns a bus without subscribers.
func NewBus() *Bus { return &Bus{subs: map[string][]*busSub{}} }

// Publish queues payload for every current subscriber of topic; it never
// blocks on a subscriber.
func (b *Bus) Publish(_ context.Context, topic string, payload []byte) error {
	b.mu.Lock()
	subs := b.subs[topic]
	b.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.queue = append(s.queue, append([]byte(nil), payload...))
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Subscribe calls fn with every payload published on topic from now on
// until cancel, which waits for a call under way.
func (b *Bus) Subscribe(topic string, fn func(payload []byte)) (cancel func()) {
	s := &busSub{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	b.mu.Lock()
	b.subs[topic] = append(b.subs[topic][:len(b.subs[topic]):len(b.subs[topic])], s)
	b.mu.Unlock()
	go s.run()
	var once sync.Once
	return func() {
		once.Do(func() {
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
			<-s.stopped
		})
	}
}

func (s *busSub) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			p := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			default:
			}
			s.fn(p)
		}
	}
}
