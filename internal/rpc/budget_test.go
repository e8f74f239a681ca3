package rpc

import (
	"context"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// paid answers with what the call cost.
func paid(context.Context, protocol.ToolExecuteParams) (any, error) {
	return map[string]any{"ok": true, "cost_usd": 0.03}, nil
}

// paidChain writes k, then calls paid four times, each after the last.
func paidChain() map[string]any {
	return proposal(
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": 1}},
		toolCall("t1", "paid", map[string]any{}, "dependencies", []string{"w"}),
		toolCall("t2", "paid", map[string]any{}, "dependencies", []string{"t1"}),
		toolCall("t3", "paid", map[string]any{}, "dependencies", []string{"t2"}),
		toolCall("t4", "paid", map[string]any{}, "dependencies", []string{"t3"}),
	)
}

// A budget crossed halfway stops dispatch: the action that would cross it
// and everything after end skipped, naming the limit, and the proposal's
// writes are rolled back.
func TestBudgetStopsChainHalfway(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit map[string]any
		which string
	}{
		{"max_tool_calls", map[string]any{"max_tool_calls": 2}, "budget exceeded: max_tool_calls (2 allowed, 2 made)"},
		{"max_cost_usd", map[string]any{"max_cost_usd": 0.05}, "budget exceeded: max_cost_usd (0.05 allowed, 0.06 spent)"},
		{"max_actions", map[string]any{"max_actions": 3}, "budget exceeded: max_actions (3 allowed, 3 started)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{})
			tb := newToolbox(t, ts, map[string]toolFunc{"paid": paid})
			var set protocol.BudgetReport
			mustCall(t, tb, protocol.MethodSessionBudgetSet, tc.limit, &set)
			if set.Limits.Scope != protocol.BudgetPerProposal {
				t.Fatalf("session.budget.set reply %+v, want the default scope proposal", set)
			}

			res := tb.submit(t, paidChain())

			st := statuses(res)
			if st["t1"] != protocol.StatusSucceeded || st["t2"] != protocol.StatusSucceeded {
				t.Fatalf("results %+v, want t1 and t2 within the budget", st)
			}
			if r := resultOf(t, res, "t3"); r.Status != protocol.StatusSkipped || r.ErrorText() != tc.which {
				t.Fatalf("t3: %s %q, want skipped with %q", r.Status, r.ErrorText(), tc.which)
			}
			if r := resultOf(t, res, "t4"); r.Status != protocol.StatusSkipped || !strings.Contains(r.ErrorText(), tc.which) {
				t.Fatalf("t4: %s %q, want skipped with %q", r.Status, r.ErrorText(), tc.which)
			}
			if n := len(tb.callLog()); n != 2 {
				t.Fatalf("%d tool calls dispatched, want 2", n)
			}
			var exists bool
			mustCall(t, tb, protocol.MethodStateExists, map[string]any{"key": "k"}, &exists)
			if exists {
				t.Fatal("the stopped proposal's state write was not rolled back")
			}
			b := res.Cost.Budget
			if b == nil || b.Spent.ToolCalls != 2 || b.Spent.CostUSD < 0.059 || b.Exceeded == "" || !strings.Contains(tc.which, b.Exceeded) {
				t.Fatalf("cost.budget %+v, want 2 calls, 0.06 spent and the limit named", b)
			}
		})
	}
}

// A session budget counts across proposals: the second one is stopped at
// the dispatch that crosses it, and admission is not blocked.
func TestSessionBudgetAccumulates(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"paid": paid})
	mustCall(t, tb, protocol.MethodSessionBudgetSet, map[string]any{"max_tool_calls": 3, "scope": "session"}, nil)
	two := proposal(
		toolCall("a", "paid", map[string]any{}),
		toolCall("b", "paid", map[string]any{}, "dependencies", []string{"a"}),
	)
	if st := statuses(tb.submit(t, two)); st["a"] != protocol.StatusSucceeded || st["b"] != protocol.StatusSucceeded {
		t.Fatalf("first proposal %+v, want both within the session budget", st)
	}
	res := tb.submit(t, two)
	if st := statuses(res); st["a"] != protocol.StatusSucceeded || st["b"] != protocol.StatusSkipped {
		t.Fatalf("second proposal %+v, want a run and b stopped", st)
	}
	if b := res.Cost.Budget; b == nil || b.Spent.ToolCalls != 3 || !strings.Contains(b.Exceeded, "scope session") {
		t.Fatalf("cost.budget %+v, want 3 calls for the connection", b)
	}
	// Removing the budget lifts the stop.
	mustCall(t, tb, protocol.MethodSessionBudgetSet, map[string]any{}, nil)
	if res := tb.submit(t, two); res.Cost.Budget != nil || statuses(res)["b"] != protocol.StatusSucceeded {
		t.Fatalf("after removing the budget: %+v", res)
	}
}

func TestSessionBudgetSetRefusesBadParams(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{})
	for _, params := range []map[string]any{
		{"max_tool_call": 2},
		{"max_actions": -1},
		{"max_cost_usd": -0.5},
		{"max_tool_calls": 2, "scope": "forever"},
	} {
		err := tb.Call(ctxT(t), protocol.MethodSessionBudgetSet, params, nil)
		if code, _ := rpcCode(t, err); code != protocol.CodeInvalidParams {
			t.Fatalf("%v: code %d, want invalid params", params, code)
		}
	}
}

// A started stream is a tool call: max_tool_calls counts it like any other.
func TestABudgetCountsStartedStreams(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"tail": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		return "done", nil
	}})
	mustCall(t, tb, protocol.MethodSessionBudgetSet, map[string]any{"max_tool_calls": 1}, nil)
	res := tb.submit(t, proposal(streaming("s1", "tail"), streaming("s2", "tail", "dependencies", []string{"s1"})))
	st := statuses(res)
	if st["s1"] != protocol.StatusSucceeded || st["s2"] != protocol.StatusSkipped || !strings.Contains(resultOf(t, res, "s2").ErrorText(), "budget exceeded") {
		t.Fatalf("two streams under max_tool_calls 1: %+v %q", st, resultOf(t, res, "s2").ErrorText())
	}
	if b := res.Cost.Budget; b == nil || b.Spent.ToolCalls != 1 {
		t.Fatalf("cost.budget %+v, want the one started stream counted", b)
	}
}
