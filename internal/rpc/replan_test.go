package rpc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// replanner answers replan.propose on tb with answers in turn (a nil entry
// answers null) and passes each request on to asked. With no answer left
// it fails the test.
func replanner(t *testing.T, tb *toolbox, answers ...any) <-chan protocol.ReplanProposeParams {
	t.Helper()
	asked := make(chan protocol.ReplanProposeParams, len(answers)+1)
	next := make(chan any, len(answers))
	for _, a := range answers {
		next <- a
	}
	tb.HandleRequest(protocol.MethodReplanPropose, func(_ context.Context, raw json.RawMessage) (any, error) {
		var req protocol.ReplanProposeParams
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Errorf("replan.propose params are not ReplanProposeParams: %v: %s", err, raw)
		}
		asked <- req
		select {
		case a := <-next:
			return a, nil
		default:
			t.Errorf("replan.propose asked more often than the test answers (attempt %d)", req.Attempt)
			return nil, nil
		}
	})
	return asked
}

// nextAsk is the next replan.propose the client received.
func nextAsk[T any](t *testing.T, asked <-chan T) T {
	t.Helper()
	select {
	case v := <-asked:
		return v
	case <-time.After(testTimeout):
		t.Fatal("replan.propose was not asked")
		var zero T
		return zero
	}
}

func setReplan(t *testing.T, tb *toolbox, cfg protocol.ReplanConfig) {
	t.Helper()
	mustCall(t, tb, protocol.MethodReplanSetConfig, cfg, nil)
}

// fails answers with a tool error.
func fails(context.Context, protocol.ToolExecuteParams) (any, error) {
	return map[string]any{"error": "upstream is down"}, nil
}

// failingPlan writes k, then calls a tool that fails: it aborts.
func failingPlan() map[string]any {
	return proposal(
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "first"}},
		toolCall("t", "flaky", map[string]any{}, "dependencies", []string{"w"}),
	)
}

func TestReplanRecoversOnSecondAttempt(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails, "steady": echo})
	other := newToolbox(t, ts, map[string]toolFunc{})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 2})
	rolledBack := make(chan bool, 1)
	fix := map[string]any{"id": "p-fix", "actions": []any{
		map[string]any{"id": "w2", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "second"}},
		toolCall("s", "steady", map[string]any{"x": 1}, "dependencies", []string{"w2"}),
	}}
	asked := make(chan protocol.ReplanProposeParams, 1)
	tb.HandleRequest(protocol.MethodReplanPropose, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req protocol.ReplanProposeParams
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		var exists bool
		err := other.Call(ctx, protocol.MethodStateExists, map[string]any{"key": "k"}, &exists)
		rolledBack <- err == nil && !exists
		asked <- req
		return fix, nil
	})

	res := tb.submit(t, failingPlan())

	req := nextAsk(t, asked)
	if req.ProposalID != "p-test" || req.Attempt != 1 || req.RequestID == "" {
		t.Fatalf("replan.propose %+v, want proposal p-test, attempt 1, a request_id", req)
	}
	if len(req.Failed) != 1 || req.Failed[0].ActionID != "t" || req.Failed[0].Tool != "flaky" ||
		req.Failed[0].Status != protocol.StatusFailed || !strings.Contains(req.Failed[0].Error, "upstream is down") {
		t.Fatalf("replan.propose failed = %+v, want action t (flaky) failed with the tool's error", req.Failed)
	}
	if strings.Join(req.Succeeded, ",") != "w" || strings.Join(req.StateKeysWritten, ",") != "k" {
		t.Fatalf("replan.propose succeeded %v, state_keys_written %v; want [w] and [k]", req.Succeeded, req.StateKeysWritten)
	}
	if !nextAsk(t, rolledBack) {
		t.Fatal("the failed attempt's state write was still there when replan.propose was asked")
	}
	if res.ProposalID != "p-test" {
		t.Fatalf("proposal_id %q, want the original p-test", res.ProposalID)
	}
	if st := statuses(res); len(st) != 2 || st["w2"] != protocol.StatusSucceeded || st["s"] != protocol.StatusSucceeded {
		t.Fatalf("results %+v, want the replacement's two actions succeeded", st)
	}
	if len(res.Replans) != 1 || res.Replans[0] != (protocol.Replan{Attempt: 1, ProposalID: "p-fix", Outcome: protocol.ReplanSucceeded}) || res.ReplanError != "" {
		t.Fatalf("replans %+v (error %q), want one succeeded attempt p-fix", res.Replans, res.ReplanError)
	}
	var k any
	mustCall(t, other, protocol.MethodStateGet, map[string]any{"key": "k"}, &k)
	if k != "second" {
		t.Fatalf("state k = %v, want the replacement's write", k)
	}
	ev := eventOf(t, other.Client, map[string]any{"kinds": []string{string(engine.EventReplanRequested)}, "proposal_id": "p-test"})
	if n, _ := ev.Data["attempt"].(float64); n != 1 {
		t.Fatalf("replan_requested event %+v, want attempt 1", ev)
	}
}

// A replacement passes every gate again: one that calls a tool an operator
// policy denies is rejected, and, with replan_on_rejected, replanned again.
func TestReplanRefusedByPolicy(t *testing.T) {
	ts := startServer(t, Options{})
	ts.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "deny_tool:forbidden", Rule: policy.DenyTool{Tool: "forbidden"}}))
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails, "forbidden": echo, "steady": echo})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 3, ReplanOnRejected: true})
	asked := replanner(t, tb,
		map[string]any{"id": "p-denied", "actions": []any{toolCall("f", "forbidden", map[string]any{})}},
		map[string]any{"id": "p-ok", "actions": []any{toolCall("s", "steady", map[string]any{})}},
	)

	res := tb.submit(t, failingPlan())

	nextAsk(t, asked)
	second := nextAsk(t, asked)
	if len(second.Failed) != 1 || second.Failed[0].ActionID != "f" || second.Failed[0].Status != protocol.StatusRejected ||
		!strings.Contains(second.Failed[0].Error, "forbidden") {
		t.Fatalf("second replan.propose failed = %+v, want action f rejected by the policy", second.Failed)
	}
	if len(res.Replans) != 2 {
		t.Fatalf("replans %+v, want two", res.Replans)
	}
	if r := res.Replans[0]; r.ProposalID != "p-denied" || r.Outcome != protocol.ReplanRejected || !strings.Contains(r.Error, "forbidden") {
		t.Fatalf("first replan %+v, want p-denied rejected by the policy", r)
	}
	if r := res.Replans[1]; r.ProposalID != "p-ok" || r.Outcome != protocol.ReplanSucceeded {
		t.Fatalf("second replan %+v, want p-ok succeeded", r)
	}
	for _, c := range tb.callLog() {
		if c.Tool == "forbidden" {
			t.Fatal("the denied tool was called")
		}
	}
}

// Without replan_on_rejected, a rejected replacement ends the loop: only an
// abort asks again.
func TestReplanStopsAtRejectionByDefault(t *testing.T) {
	ts := startServer(t, Options{})
	ts.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "deny_tool:forbidden", Rule: policy.DenyTool{Tool: "forbidden"}}))
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails, "forbidden": echo})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 3})
	replanner(t, tb, map[string]any{"id": "p-denied", "actions": []any{toolCall("f", "forbidden", map[string]any{})}})

	res := tb.submit(t, failingPlan())

	if len(res.Replans) != 1 || res.Replans[0].Outcome != protocol.ReplanRejected || res.ReplanError != "" {
		t.Fatalf("replans %+v (error %q), want one rejected attempt and no further ask", res.Replans, res.ReplanError)
	}
	if st := statuses(res)["f"]; st != protocol.StatusRejected {
		t.Fatalf("results %+v, want the rejected replacement's", res.Results)
	}
}

// max_replans counts every replacement, an invalid one included: a
// verify_before_execute refusal is an attempt that did not run.
func TestReplanExhausted(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 2, VerifyBeforeExecute: true})
	asked := replanner(t, tb,
		map[string]any{"id": "p-invalid", "actions": []any{toolCall("u", "no_such_tool", map[string]any{})}},
		map[string]any{"id": "p-again", "actions": []any{toolCall("t2", "flaky", map[string]any{})}},
	)

	res := tb.submit(t, failingPlan())

	nextAsk(t, asked)
	if second := nextAsk(t, asked); len(second.Failed) != 1 || second.Failed[0].ActionID != "u" || !strings.Contains(second.Failed[0].Error, "verify:") {
		t.Fatalf("replan.propose after the invalid replacement: failed = %+v, want its verify error", second.Failed)
	}
	if len(asked) != 0 {
		t.Fatal("replan.propose asked a third time with max_replans 2")
	}
	if len(res.Replans) != 2 || res.Replans[0].Outcome != protocol.ReplanInvalid || !strings.Contains(res.Replans[0].Error, "no_such_tool") ||
		res.Replans[1].Outcome != protocol.ReplanFailed {
		t.Fatalf("replans %+v, want invalid then failed", res.Replans)
	}
	if !strings.Contains(res.ReplanError, "max_replans (2) exhausted") {
		t.Fatalf("replan_error %q, want max_replans exhausted", res.ReplanError)
	}
	if st := statuses(res); len(st) != 1 || st["t2"] != protocol.StatusFailed {
		t.Fatalf("results %+v, want the last executed attempt's", st)
	}
	ev := eventOf(t, tb.Client, map[string]any{"kinds": []string{string(engine.EventReplanExhausted)}, "proposal_id": "p-test"})
	if n, _ := ev.Data["max_replans"].(float64); n != 2 {
		t.Fatalf("replan_exhausted event %+v", ev)
	}
}

// An answer that is not a proposal, or null, ends the loop with the first
// attempt's result and says why.
func TestReplanGarbageAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  any
		wantErr string
	}{
		{"string", "try harder", "must be answered with an ActionProposal or null"},
		{"actions not an array", map[string]any{"actions": "none"}, "must be answered with an ActionProposal or null"},
		{"null gives up", nil, "the client gave up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{})
			tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails})
			setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 2})
			replanner(t, tb, tc.answer)

			res := tb.submit(t, failingPlan())

			if !strings.Contains(res.ReplanError, tc.wantErr) || len(res.Replans) != 0 {
				t.Fatalf("replan_error %q, replans %+v; want %q and no attempt", res.ReplanError, res.Replans, tc.wantErr)
			}
			if st := statuses(res); st["t"] != protocol.StatusFailed || res.ProposalID != "p-test" {
				t.Fatalf("result %+v, want the first attempt's", res)
			}
		})
	}
}

// proposal.cancel with the original id stops a loop that waits for
// replan.propose; the client is told with tools.cancel.
func TestProposalCancelStopsReplanLoop(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 2})
	waiting := make(chan string, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the client closes
	tb.HandleRequest(protocol.MethodReplanPropose, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req protocol.ReplanProposeParams
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		waiting <- req.RequestID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})
	ch := submitAsync(t, tb.Client, failingPlan())
	var requestID string
	select {
	case requestID = <-waiting:
	case <-time.After(testTimeout):
		t.Fatal("replan.propose never arrived")
	}
	if !cancelProposal(t, tb, "p-test", "enough") {
		t.Fatal("proposal.cancel did not find the replanning proposal")
	}
	res := awaitResult(t, ch, 2)
	if res.ReplanError != "cancelled: enough" {
		t.Fatalf("replan_error %q, want the cancel reason", res.ReplanError)
	}
	select {
	case c := <-tb.cancel:
		if c.RequestID != requestID || c.Reason != "cancelled: enough" {
			t.Fatalf("tools.cancel %+v, want request %s with the cancel reason", c, requestID)
		}
	case <-time.After(testTimeout):
		t.Fatal("the pending replan.propose got no tools.cancel")
	}
}

// With max_replans 0 (the default) a failed proposal is not replanned and
// its result carries no replan fields.
func TestReplanOffByDefault(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails})
	replanner(t, tb) // any ask fails the test
	res := tb.submit(t, failingPlan())
	if res.Replans != nil || res.ReplanError != "" || statuses(res)["t"] != protocol.StatusFailed {
		t.Fatalf("result %+v, want a plain failure", res)
	}
}

func TestReplanSetConfigRefusesBadParams(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{})
	for _, params := range []map[string]any{
		{"max_replans": -1},
		{"max_replans": maxReplansLimit + 1},
		{"max_replans": 1, "delay_ms": maxReplanDelay + 1},
		{"max_replan": 2},
	} {
		err := tb.Call(ctxT(t), protocol.MethodReplanSetConfig, params, nil)
		if code, _ := rpcCode(t, err); code != protocol.CodeInvalidParams {
			t.Fatalf("%v: code %d, want invalid params", params, code)
		}
	}
}

// A client that never answers replan.propose ends the loop at the tool
// timeout with the last result; it is told with tools.cancel.
func TestReplanUnansweredTimesOut(t *testing.T) {
	ts := startServer(t, Options{ToolTimeout: 20 * time.Millisecond})
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": fails})
	setReplan(t, tb, protocol.ReplanConfig{MaxReplans: 1})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the client closes
	tb.HandleRequest(protocol.MethodReplanPropose, func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})

	res := tb.submit(t, failingPlan())

	if !strings.Contains(res.ReplanError, "replan.propose got no answer within") || statuses(res)["t"] != protocol.StatusFailed {
		t.Fatalf("result %+v, want the first attempt's with the timeout named", res)
	}
	select {
	case c := <-tb.cancel:
		if !strings.Contains(c.Reason, "no answer within") {
			t.Fatalf("tools.cancel %+v, want the timeout as its reason", c)
		}
	case <-time.After(testTimeout):
		t.Fatal("the unanswered replan.propose got no tools.cancel")
	}
}
