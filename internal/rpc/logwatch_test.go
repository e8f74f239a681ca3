package rpc

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/zap/zapcore"
)

// logWatch keeps every line a test server logs, so that a test waits for
// the server's own signal (such as "connection closed") instead of polling.
type logWatch struct {
	mu      sync.Mutex
	entries []logEntry
	changed chan struct{} // closed and replaced on every new entry
}

// logEntry is one logged line: its message and its fields.
type logEntry struct {
	msg    string
	fields map[string]any
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

// core is a zap core that writes into w at info level and above.
func (w *logWatch) core() zapcore.Core { return &watchCore{w: w} }

func (w *logWatch) add(e logEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.entries = append(w.entries, e)
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns the n-th entry (from 1) with message msg, waiting for it
// until ctx ends.
func (w *logWatch) wait(ctx context.Context, msg string, n int) (logEntry, error) {
	for {
		w.mu.Lock()
		seen := 0
		for _, e := range w.entries {
			if e.msg == msg {
				if seen++; seen == n {
					w.mu.Unlock()
					return e, nil
				}
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return logEntry{}, ctx.Err()
		}
	}
}

// waitLog waits for the n-th log line with message msg, failing the test
// when it does not come within testTimeout.
func (ts *testServer) waitLog(t *testing.T, msg string, n int) logEntry {
	t.Helper()
	e, err := ts.logs.wait(ctxT(t), msg, n)
	if err != nil {
		t.Fatalf("no log line %q (number %d): %v", msg, n, err)
	}
	return e
}

// watchCore is the zapcore.Core behind logWatch.
type watchCore struct {
	w      *logWatch
	fields []zapcore.Field
}

func (c *watchCore) Enabled(l zapcore.Level) bool { return l >= zapcore.InfoLevel }

func (c *watchCore) With(fields []zapcore.Field) zapcore.Core {
	return &watchCore{w: c.w, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *watchCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *watchCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fields...) {
		f.AddTo(enc)
	}
	c.w.add(logEntry{msg: e.Message, fields: enc.Fields})
	return nil
}

func (c *watchCore) Sync() error { return nil }

// count is the number of entries so far with message msg.
func (w *logWatch) count(msg string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.entries {
		if e.msg == msg {
			n++
		}
	}
	return n
}
