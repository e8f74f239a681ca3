package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// lineWatch is the daemon's stderr as parsed JSON lines, kept in full so
// that a wait never misses a line and a slow reader never drops one.
type lineWatch struct {
	mu      sync.Mutex
	partial []byte
	lines   []map[string]any
	closed  bool
	changed chan struct{} // closed and replaced on every new line and on close
}

func newLineWatch() *lineWatch { return &lineWatch{changed: make(chan struct{})} }

// Write takes stderr as the daemon writes it; lines that are not JSON (a
// race report, a panic) are kept as {"msg": "", "text": line}.
func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		raw := w.partial[:i]
		var line map[string]any
		if json.Unmarshal(raw, &line) != nil {
			line = map[string]any{"msg": "", "text": string(raw)}
		}
		w.lines = append(w.lines, line)
		w.partial = w.partial[i+1:]
	}
	w.notifyLocked()
	return len(p), nil
}

// close marks the end of the output: waits for a line not yet seen fail.
func (w *lineWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.notifyLocked()
}

func (w *lineWatch) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

var errDaemonExited = errors.New("the daemon exited")

// wait returns the first line at or after index from whose msg is msg,
// and the index after it.
func (w *lineWatch) wait(ctx context.Context, from int, msg string) (map[string]any, int, error) {
	return w.waitFor(ctx, from, func(line map[string]any) bool { return line["msg"] == msg })
}

// waitFor returns the first line at or after index from that match
// accepts, and the index after it.
func (w *lineWatch) waitFor(ctx context.Context, from int, match func(map[string]any) bool) (map[string]any, int, error) {
	for {
		w.mu.Lock()
		for i := from; i < len(w.lines); i++ {
			if match(w.lines[i]) {
				line := w.lines[i]
				w.mu.Unlock()
				return line, i + 1, nil
			}
		}
		from = len(w.lines)
		closed, changed := w.closed, w.changed
		w.mu.Unlock()
		if closed {
			return nil, from, errDaemonExited
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, from, ctx.Err()
		}
	}
}
