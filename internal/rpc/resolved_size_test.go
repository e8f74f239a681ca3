package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/allocs"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// doublingActions are n chained state_writes, each value
// [$prev.output, $prev.output]: n actions would resolve to 2^n copies.
func doublingActions(n int) []map[string]any {
	acts := []map[string]any{stateWrite("d0", "d0", "x")}
	for i := 1; i < n; i++ {
		prev := fmt.Sprintf("$d%d.output", i-1)
		acts = append(acts, stateWrite(fmt.Sprintf("d%d", i), fmt.Sprintf("d%d", i), []any{prev, prev}))
	}
	return acts
}

// doublingProposal is the doubling chain of n actions.
func doublingProposal(n int) map[string]any { return proposal(doublingActions(n)...) }

// The doubling chain's sizes are known from the proposal alone: the
// daemon refuses it whole before any action runs, with one error that
// names the first action past max_resolved_action_bytes, its size and the
// setting. No tool is called, no state is written, and the refusal costs
// less than running the actions within the bound would; those actions, on
// their own, run and leave an output that the named action holds twice,
// past the bound, so the run would have refused it too.
func TestADoublingChainIsRefusedBeforeAnyActionRuns(t *testing.T) {
	const limit = 256 << 10
	ts := startRuntime(t, engine.Options{MaxResolvedActionBytes: limit}, nil)
	tb := newToolbox(t, ts, map[string]toolFunc{"note": echo})
	acts := append([]map[string]any{toolCall("n", "note", map[string]any{"text": "first"})}, doublingActions(40)...)
	var res protocol.ProposalResult
	used := allocs.Bytes(func() { res = tb.submit(t, proposal(acts...)) })

	msg := res.Results[0].ErrorText()
	var named int
	if i := strings.Index(msg, "action 'd"); i < 0 {
		t.Fatalf("the refusal names no action of the chain: %q", msg)
	} else if _, err := fmt.Sscanf(msg[i+len("action 'd"):], "%d'", &named); err != nil || named < 1 {
		t.Fatalf("the refusal names no action of the chain: %q", msg)
	}
	for _, want := range []string{
		"proposal refused before any action ran",
		fmt.Sprintf("action 'd%d' would pass more than %d bytes", named, limit),
		"(max_resolved_action_bytes): at least ",
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the refusal %q does not say %q", msg, want)
		}
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusRejected || r.ErrorText() != msg {
			t.Fatalf("action %s: %s %q; every action must be refused with %q", r.ActionID, r.Status, r.ErrorText(), msg)
		}
	}
	if res.Cost.ActionsExecuted != 0 || res.Cost.ToolCalls != 0 || len(tb.callLog()) != 0 {
		t.Fatalf("the refused proposal ran: %+v, tool calls %v", res.Cost, tb.callLog())
	}
	var keys []string
	mustCall(t, tb, protocol.MethodStateKeys, map[string]any{}, &keys)
	if len(keys) != 0 {
		t.Fatalf("the refused proposal wrote state: %v", keys)
	}

	// The actions before the named one, on their own: they run, and the
	// named action would hold their last output twice.
	var base protocol.ProposalResult
	baseline := allocs.Bytes(func() { base = tb.submit(t, doublingProposal(named)) })
	for _, r := range base.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("the chain before d%d, alone: %s %s %q", named, r.ActionID, r.Status, r.ErrorText())
		}
	}
	if last := mustJSON(base.Results[named-1].Output); 2*len(last) <= limit-64 || len(last) > limit {
		t.Fatalf("d%d was named with the last output at %d bytes encoded; the bound is %d", named, len(last), limit)
	}
	t.Logf("40 doublings refused: %d bytes allocated (client and daemon); the %d actions within the bound, run: %d", used, named, baseline)
	if used >= baseline {
		t.Fatalf("the refusal allocated %d bytes, running the %d actions within the bound %d: they were run", used, named, baseline)
	}
}

// BenchmarkHostileDoubling40 is the 40-action doubling proposal over the
// wire, with the default bounds; BENCHMARKS.md reports it.
func BenchmarkHostileDoubling40(b *testing.B) {
	ts := startServerWith(b, serverSetup{})
	c, err := client.Dial(context.Background(), ts.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	params := map[string]any{"proposal": doublingProposal(40)}
	b.Logf("proposal: %d bytes", len(mustJSON(params)))
	for b.Loop() {
		var res json.RawMessage
		if err := c.Call(context.Background(), protocol.MethodProposalSubmit, params, &res); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(res)), "reply-bytes")
	}
}
