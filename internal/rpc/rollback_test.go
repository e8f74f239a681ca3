package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// P1 writes k and waits on a tool; P2 writes k and succeeds; P1's tool then
// fails and P1 rolls back. P2's committed value must survive: a rollback
// restores only keys that still hold its own write.
func TestRollbackKeepsAConcurrentProposalsWrite(t *testing.T) {
	ts := startServer(t, Options{})
	waiting := make(chan struct{})
	release := make(chan struct{})
	tb := newToolbox(t, ts, map[string]toolFunc{
		"fails_later": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
			close(waiting)
			select {
			case <-release:
				return map[string]any{"error": "the tool failed"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	p1 := map[string]any{"id": "p1", "actions": []any{
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "p1"}},
		map[string]any{"id": "mine", "type": "state_write", "parameters": map[string]any{"key": "only-p1", "value": 1}},
		toolCall("t", "fails_later", map[string]any{}, "dependencies", []string{"w", "mine"}, "failure_behavior", "abort"),
	}}
	ch := submitAsync(t, tb.Client, p1)
	select {
	case <-waiting:
	case <-time.After(testTimeout):
		t.Fatal("p1's tool was never called")
	}
	other := newToolbox(t, ts, map[string]toolFunc{})
	res2 := other.submit(t, map[string]any{"id": "p2", "actions": []any{
		map[string]any{"id": "w2", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "p2"}},
	}})
	if res2.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("p2: %s %s", res2.Results[0].Status, res2.Results[0].ErrorText())
	}
	close(release)
	res1 := awaitResult(t, ch, 3)
	if st := statuses(res1)["t"]; st != protocol.StatusFailed {
		t.Fatalf("p1's tool: %s", st)
	}
	var k any
	if err := other.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "k"}, &k); err != nil {
		t.Fatal(err)
	}
	if k != "p2" {
		t.Fatalf("state.get k after p1's rollback = %v, want p2's committed value", k)
	}
	var exists bool
	if err := other.Call(ctxT(t), protocol.MethodStateExists, map[string]any{"key": "only-p1"}, &exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("p1's own write to a key nobody else touched was not rolled back")
	}
}
