package approvals

import "sync"

// Watchers hands decisions to whoever waits on a fingerprint: the one way
// every ledger (the journal here, the shared store's cache) releases a
// parked action. The zero value is ready to use.
type Watchers struct {
	mu  sync.Mutex
	set map[string]map[*watcher]struct{}
}

// watcher is one Watch of a fingerprint.
type watcher struct{ ch chan Record }

// Watch returns a channel that receives the next decision Wake hands out
// for fingerprint after the call, and a function that stops watching. A
// caller that must not miss a decision watches first, then reads the
// ledger's Decision.
func (ws *Watchers) Watch(fingerprint string) (<-chan Record, func()) {
	w := &watcher{ch: make(chan Record, 1)}
	ws.mu.Lock()
	if ws.set == nil {
		ws.set = make(map[string]map[*watcher]struct{})
	}
	set := ws.set[fingerprint]
	if set == nil {
		set = make(map[*watcher]struct{})
		ws.set[fingerprint] = set
	}
	set[w] = struct{}{}
	ws.mu.Unlock()
	return w.ch, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if set := ws.set[fingerprint]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(ws.set, fingerprint)
			}
		}
	}
}

// Wake hands r to the watchers of its fingerprint; each holds at most one
// undelivered decision (a later one is in the ledger's Decision).
func (ws *Watchers) Wake(r Record) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set[r.Fingerprint] {
		select {
		case w.ch <- r:
		default:
		}
	}
}
