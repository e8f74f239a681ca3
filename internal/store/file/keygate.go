package file

import (
	"context"
	"fmt"
	"sync"
)

// keyGate gives the writers of one journal key a turn each, while writers
// of different keys go on together (and share fsyncs): what a writer reads
// of its key and the record it appends because of it have no other write
// of that key between them. That is how a file journal, whose last record
// per key wins, keeps a first receipt or tombstones only its own proposal's
// result, as a conditional statement does in the shared store. The gate's
// lock is never held across the journal's I/O; only the key's turn is.
type keyGate struct {
	mu    sync.Mutex
	turns map[string]chan struct{} // key → closed when its writer leaves
}

// enter waits for key's turn, or for ctx to end; the writer calls leave
// when its append has returned.
func (g *keyGate) enter(ctx context.Context, key string) (leave func(), err error) {
	for {
		g.mu.Lock()
		busy, taken := g.turns[key]
		if !taken {
			if g.turns == nil {
				g.turns = make(map[string]chan struct{})
			}
			done := make(chan struct{})
			g.turns[key] = done
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.turns, key)
				g.mu.Unlock()
				close(done)
			}, nil
		}
		g.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("waited for another write of key %s to be fsynced until %w", key, ctx.Err())
		}
	}
}
