package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// A proposal whose actions may legitimately take longer than the handler
// timeout is not cut off: its deadline comes from its budget. With 1,100
// actions at the largest timeout_ms and max_retries, the budget is past what
// a Duration holds; it must saturate, not wrap around to a short deadline.
func TestAnInBudgetProposalOutlivesTheHandlerTimeout(t *testing.T) {
	ts := startServer(t, Options{HandlerTimeout: 50 * time.Millisecond})
	slowStarted := make(chan struct{})
	release := make(chan struct{})
	tb := newToolbox(t, ts, map[string]toolFunc{
		"quick": echo,
		"slow": func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
			close(slowStarted)
			select {
			case <-release:
				return "done", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	actions := []map[string]any{toolCall("slow", "slow", map[string]any{})}
	for i := range 1100 {
		actions = append(actions, toolCall(fmt.Sprintf("q%d", i), "quick", map[string]any{"n": i},
			"timeout_ms", 86_400_000, "failure_behavior", "retry", "max_retries", 100))
	}
	ch := submitAsync(t, tb.Client, proposal(actions...))
	select {
	case <-slowStarted:
	case <-time.After(testTimeout):
		t.Fatal("the slow tool was never called")
	}
	// A request started after the proposal, with the same handler timeout,
	// runs out of it: once it has, so would the proposal have, had its
	// deadline been the handler timeout.
	blockers["budget-probe"] = make(chan struct{})
	probe := ts.dial(t, "")
	code, _ := rpcCode(t, probe.Call(ctxT(t), "test.block", map[string]any{"name": "budget-probe"}, nil))
	if code != protocol.CodeHandlerDeadline {
		t.Fatalf("the probe got %d, want the handler deadline", code)
	}
	close(release)
	res := awaitResult(t, ch, 1101)
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("action %s: %s %s", r.ActionID, r.Status, r.ErrorText())
		}
	}
}
