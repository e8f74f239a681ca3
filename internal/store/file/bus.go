package file

import (
	"context"
	"sync"

	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/store"
)

// busQueue bounds what one subscription may have undelivered before the
// oldest payload is dropped.
const busQueue = 1024

// Bus carries notifications within this process: each subscription has its
// own bounded queue and goroutine, so a slow subscriber holds up nobody
// (past busQueue its oldest payloads are dropped).
type Bus struct {
	mu     sync.Mutex
	subs   map[string]map[*fanout.Queue[[]byte]]struct{}
	closed bool
}

var _ store.Bus = (*Bus)(nil)

// NewBus returns a bus without subscribers; Close stops the ones left.
func NewBus() *Bus {
	return &Bus{subs: make(map[string]map[*fanout.Queue[[]byte]]struct{})}
}

// Publish hands a copy of payload to every subscriber of topic. It never
// blocks and never fails.
func (b *Bus) Publish(_ context.Context, topic string, payload []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs[topic]) == 0 {
		return nil
	}
	p := append([]byte(nil), payload...)
	for q := range b.subs[topic] {
		q.Push(p)
	}
	return nil
}

// Subscribe calls fn with every payload published on topic from now on, in
// order, on a goroutine of its own, until cancel (which waits for a call in
// progress). After Close it subscribes to nothing.
func (b *Bus) Subscribe(topic string, fn func(payload []byte)) (cancel func()) {
	q := fanout.New(func(_ context.Context, it fanout.Item[[]byte]) error {
		fn(it.Value)
		return nil
	}, fanout.Options{Capacity: busQueue})
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		q.Close()
		return func() {}
	}
	set := b.subs[topic]
	if set == nil {
		set = make(map[*fanout.Queue[[]byte]]struct{})
		b.subs[topic] = set
	}
	set[q] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if set := b.subs[topic]; set != nil {
				delete(set, q)
				if len(set) == 0 {
					delete(b.subs, topic)
				}
			}
			b.mu.Unlock()
			q.Close()
		})
	}
}

// Close stops every subscription still open and waits for their goroutines.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	var qs []*fanout.Queue[[]byte]
	for _, set := range b.subs {
		for q := range set {
			qs = append(qs, q)
		}
	}
	b.subs = map[string]map[*fanout.Queue[[]byte]]struct{}{}
	b.mu.Unlock()
	for _, q := range qs {
		q.Close()
	}
}
