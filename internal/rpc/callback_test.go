package rpc

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// tools.execute params are encoded by hand: byte for byte what json.Marshal
// writes for the struct.
func TestToolExecuteParamsEncodeAsMarshal(t *testing.T) {
	for _, p := range []protocol.ToolExecuteParams{
		{},
		{ActionID: "a1", Tool: "noop", Parameters: map[string]any{"i": json.Number("3"), "s": "<x>", "n": nil, "l": []any{true}}, TimeoutMs: 30000, Attempt: 1, RequestID: "cb-1", SessionID: "conn-1"},
		{ActionID: "é\"", Tool: "t\n", Parameters: map[string]any{}, TimeoutMs: 1<<64 - 1, Attempt: -2, RequestID: "cb-h9", AgentID: "agent", InvocationMode: "streaming", Handle: "h9"},
		{Parameters: map[string]any{"f": 1.5e-9, "nested": map[string]any{"b": 1, "a": 2.0}}},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendToolExecute(nil, &p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("\n got  %s (%v)\n want %s", got, err, want)
		}
	}
}

// A proposal's result is encoded by hand: byte for byte what json.Marshal
// writes.
func TestProposalResultEncodesAsMarshal(t *testing.T) {
	errText := "tool 'x' failed: <boom> & \"more\""
	for _, r := range []protocol.ProposalResult{
		{},
		{ProposalID: "p1", Results: []protocol.ActionResult{}},
		{ProposalID: "p\u2028", Results: []protocol.ActionResult{
			{ActionID: "a", Status: protocol.StatusSucceeded, Output: map[string]any{"ok": true, "n": json.Number("1.50")}, StateChanges: map[string]any{}, DurationMs: 0.123, Timestamp: "2026-11-30T00:00:00.123456789Z"},
			{ActionID: "b", Status: protocol.StatusFailed, Error: &errText, DurationMs: 1e-7, CacheHit: "result"},
			{ActionID: "c", Status: protocol.StatusSkipped, Output: []any{1.5, "x"}, StateChanges: map[string]any{"k": nil}, DurationMs: 12345},
		}, Cost: protocol.CostSummary{ToolCalls: 3, ActionsExecuted: 2, ActionsSkipped: 1, TotalDurationMs: 12.5, Retries: 1,
			Budget: &protocol.BudgetReport{Exceeded: "usd"}},
			Replans: []protocol.Replan{{Attempt: 1, ProposalID: "p2", Outcome: "failed", Error: "e"}}, ReplanError: "gave up"},
	} {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendProposalResult(nil, &r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("\n got  %s (%v)\n want %s", got, err, want)
		}
	}
}
