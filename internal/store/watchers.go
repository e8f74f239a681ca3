package store

import (
	"sync"

	"github.com/parslee-ai/car-server/protocol"
)

// ApprovalWatchers hands decisions to whoever waits on a fingerprint: the
// one way every approval ledger (the file store's journal, the postgres
// store's cache) releases a parked action. The zero value is ready to use.
type ApprovalWatchers struct {
	mu  sync.Mutex
	set map[string]map[*watcher]struct{}
}

// watcher is one Watch of a fingerprint.
type watcher struct{ ch chan protocol.ApprovalRecord }

// Watch returns a channel that receives the next decision Wake hands out
// for fingerprint after the call, and a function that stops watching. A
// caller that must not miss a decision watches first, then reads the
// ledger's Decision.
func (ws *ApprovalWatchers) Watch(fingerprint string) (<-chan protocol.ApprovalRecord, func()) {
	w := &watcher{ch: make(chan protocol.ApprovalRecord, 1)}
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
func (ws *ApprovalWatchers) Wake(r protocol.ApprovalRecord) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set[r.Fingerprint] {
		select {
		case w.ch <- r:
		default:
		}
	}
}
