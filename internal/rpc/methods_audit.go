package rpc

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// AuditCheckEvery is how often audit.status may verify the event log
// again: a check reads the whole durable log (up to events_max_bytes), so
// callers in between are answered with the last check, which says when it
// was made.
const AuditCheckEvery = time.Minute

// auditChecks keeps the last check of the event log. One check runs at a
// time (turn); callers arriving meanwhile wait for their turn, or for their
// context, and are then answered with that check.
type auditChecks struct {
	turn chan struct{} // holds a token while a caller looks or checks
	mu   sync.Mutex
	last *protocol.AuditStatus
}

func newAuditChecks() auditChecks { return auditChecks{turn: make(chan struct{}, 1)} }

// recent is the last check when it is younger than AuditCheckEvery.
func (a *auditChecks) recent() (protocol.AuditStatus, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil && time.Since(a.last.CheckedAt) < AuditCheckEvery {
		return *a.last, true
	}
	return protocol.AuditStatus{}, false
}

// auditStatus answers audit.status: the last check when it is recent, else
// a new one.
func (c *conn) auditStatus(ctx context.Context, _ *json.RawMessage) (any, error) {
	a := &c.srv.audit
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-a.turn }()
	if st, ok := a.recent(); ok {
		return st, nil
	}
	var st protocol.AuditStatus
	if check := c.srv.opts.AuditCheck; check != nil {
		var err error
		if st, err = check(ctx); err != nil {
			return nil, internalError("check the event log: %v", err) // not kept: the next call checks again
		}
	} else {
		verified, tampered := c.srv.rt.Events.VerifyChain()
		st = protocol.AuditStatus{Log: "memory", OK: tampered < 0, Events: verified}
		if tampered >= 0 {
			st.Failure = "the in-memory chain breaks at the event at index " + strconv.Itoa(tampered)
		}
	}
	if st.CheckedAt.IsZero() {
		st.CheckedAt = time.Now().UTC()
	}
	a.mu.Lock()
	a.last = &st
	a.mu.Unlock()
	return st, nil
}
