package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// Taint through state.get and state.set. The daemon cannot see what an
// agent does with a value between reading it and writing it back, so the
// rule follows the connection: once a connection has received tainted
// data (the output of a tainted action of its own, or a tainted key read
// with state.get or state.snapshot), every key it writes is tainted, with
// state.set or with any action of its proposals. Writing a value back
// therefore never launders it. A connection that has received none is a
// trusted writer: its state.set clears the key's taint, as a trusted
// action's write does.

// NoteStateRead records that the session received the values of keys
// (state.get, state.snapshot): when one is tainted, the session has
// received tainted data. It fails when the ledger cannot tell, and the
// caller then hands out no value.
func (rt *Runtime) NoteStateRead(ctx context.Context, s *Session, tenant string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	found, err := rt.integ.ledger.store.Lookup(ctx, tenant, keys)
	if err != nil {
		return fmt.Errorf("the taint ledger cannot say whether the keys read are tainted: %w", err)
	}
	for _, k := range keys { // the first key asked about, not the map's order
		if e, ok := found[k]; ok {
			rt.noteTainted(s, fmt.Sprintf("state key '%s' read with state.get or state.snapshot, tainted by %s", k, describeTaint(e)))
			return nil
		}
	}
	return nil
}

// SetState writes one key for the session (state.set) and keeps the
// ledger in step. A session that received tainted data taints the key
// before the value is written, so a failure leaves the key tainted, never
// clean; the write is refused while the ledger is full. A trusted write
// clears the key's taint after the value is written.
func (rt *Runtime) SetState(ctx context.Context, s *Session, tenant, key string, v any) error {
	by := rt.TaintedBy(s)
	if by == "" {
		if err := rt.State.Set(ctx, tenant, key, v); err != nil {
			return err
		}
		if _, err := rt.integ.ledger.store.Delete(context.WithoutCancel(ctx), tenant, []string{key}); err != nil {
			return fmt.Errorf("the value was written, but its key's taint could not be cleared (it stays tainted): %w", err)
		}
		return nil
	}
	if err := rt.taintRoom(ctx); err != nil {
		return err
	}
	e := protocol.TaintEntry{Key: key, ProposalID: "", ActionID: "state.set", Origin: boundOrigin("written with state.set by connection " + s.ID + ", which had received tainted data: " + by),
		At: time.Now().UTC().Format(time.RFC3339Nano)}
	if err := rt.integ.ledger.store.Put(ctx, tenant, []protocol.TaintEntry{e}); err != nil {
		return fmt.Errorf("the key's taint could not be recorded, so the value was not written: %w", err)
	}
	return rt.State.Set(ctx, tenant, key, v)
}
