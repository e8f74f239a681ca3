package rpc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

func TestDependencyOrder(t *testing.T) {
	ts := startServer(t, Options{})
	var mu sync.Mutex
	var order []string
	record := func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		mu.Lock()
		order = append(order, call.ActionID)
		mu.Unlock()
		return "ok", nil
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"step": record})
	res := tb.submit(t, proposal(
		toolCall("c", "step", nil, "dependencies", []string{"b"}),
		toolCall("b", "step", nil, "dependencies", []string{"a"}),
		toolCall("a", "step", nil),
		// d reads "built", which a state_write earlier in the proposal writes.
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "built", "value": true}, "dependencies": []string{"c"}},
		toolCall("d", "step", nil, "state_dependencies", []string{"built"}),
	))
	for id, st := range statuses(res) {
		if st != protocol.StatusSucceeded {
			t.Fatalf("%s: %s (%s)", id, st, resultOf(t, res, id).ErrorText())
		}
	}
	if got := strings.Join(order, ","); got != "a,b,c,d" {
		t.Fatalf("tool order %s, want a,b,c,d", got)
	}
	if res.Cost.ToolCalls != 4 || res.Cost.ActionsExecuted != 5 || res.ProposalID != "p-test" {
		t.Fatalf("cost %+v id %s", res.Cost, res.ProposalID)
	}
}

func TestIndependentActionsRunConcurrently(t *testing.T) {
	ts := startServer(t, Options{})
	started := make(chan string, 2)
	release := make(chan struct{})
	var once sync.Once
	var inFlight sync.WaitGroup
	inFlight.Add(2)
	go func() {
		inFlight.Wait()
		once.Do(func() { close(release) })
	}()
	slow := func(ctx context.Context, call protocol.ToolExecuteParams) (any, error) {
		started <- call.ActionID
		inFlight.Done()
		select {
		case <-release: // both are in flight: neither was answered first
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"slow": slow})
	res := tb.submit(t, proposal(
		toolCall("x", "slow", nil, "timeout_ms", 5000),
		toolCall("y", "slow", nil, "timeout_ms", 5000),
	))
	if s := statuses(res); s["x"] != protocol.StatusSucceeded || s["y"] != protocol.StatusSucceeded {
		t.Fatalf("both should succeed once both were in flight: %v", s)
	}
}

func TestInterpolation(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{
		"list": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return map[string]any{"items": []any{map[string]any{"name": "first", "size": 3}}}, nil
		},
		"echo": echo,
	})
	res := tb.submit(t, proposal(
		toolCall("a1", "list", nil),
		toolCall("a2", "echo", map[string]any{
			"whole": "$a1.output",
			"deep":  "$a1.output.items.0.name",
			"num":   "$a1.output.items.0.size",
			"text":  "name=$a1.output.items.0.name size=$a1.output.items.0.size",
			"list":  []any{"$a1.output.items.0.name", "plain"},
		}),
	))
	a2 := resultOf(t, res, "a2")
	if a2.Status != protocol.StatusSucceeded {
		t.Fatalf("a2 %s: %s", a2.Status, a2.ErrorText())
	}
	got := mustJSON(a2.Output)
	want := `{"deep":"first","list":["first","plain"],"num":3,"text":"name=first size=3","whole":{"items":[{"name":"first","size":3}]}}`
	if string(got) != want {
		t.Fatalf("interpolated params\n got %s\nwant %s", got, want)
	}
	// A reference implies the edge: a2 ran after a1 without listing it.
	calls := tb.callLog()
	if len(calls) != 2 || calls[0].ActionID != "a1" {
		t.Fatalf("calls %+v", calls)
	}

	// A path that does not exist rejects the action, naming the step.
	res = tb.submit(t, proposal(toolCall("b1", "list", nil), toolCall("b2", "echo", map[string]any{"x": "$b1.output.items.7"})))
	if b2 := resultOf(t, res, "b2"); b2.Status != protocol.StatusRejected || !strings.Contains(b2.ErrorText(), "'7' is not an index") {
		t.Fatalf("bad path: %s %s", b2.Status, b2.ErrorText())
	}
}

func TestRetriesCountAttemptsFromOne(t *testing.T) {
	ts := startServer(t, Options{})
	var attempts []int
	var requestIDs []string
	flaky := func(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
		attempts = append(attempts, call.Attempt)
		requestIDs = append(requestIDs, call.RequestID)
		if call.Attempt < 3 {
			return nil, fmt.Errorf("transient failure %d", call.Attempt)
		}
		return "third time", nil
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky": flaky})
	res := tb.submit(t, proposal(toolCall("r", "flaky", nil, "failure_behavior", "retry", "max_retries", 3)))
	if r := resultOf(t, res, "r"); r.Status != protocol.StatusSucceeded || r.Output != "third time" {
		t.Fatalf("retried action: %+v", r)
	}
	if !reflect.DeepEqual(attempts, []int{1, 2, 3}) {
		t.Fatalf("attempts %v", attempts)
	}
	if requestIDs[0] == requestIDs[1] || requestIDs[1] == requestIDs[2] {
		t.Fatalf("each attempt needs its own request_id: %v", requestIDs)
	}
	if res.Cost.Retries != 2 || res.Cost.ToolCalls != 3 {
		t.Fatalf("cost %+v", res.Cost)
	}

	// Exhausted retries abort.
	attempts = nil
	res = tb.submit(t, proposal(toolCall("r2", "flaky", nil, "failure_behavior", "retry", "max_retries", 1)))
	if r := resultOf(t, res, "r2"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "gave up after 2 attempts") {
		t.Fatalf("exhausted: %s %s", r.Status, r.ErrorText())
	}
}

func TestTimeoutFailsAndSendsCancelWithTheSameRequestID(t *testing.T) {
	ts := startServer(t, Options{})
	hang := func(ctx context.Context, _ protocol.ToolExecuteParams) (any, error) {
		<-ctx.Done() // the client's own context ends when it closes
		return nil, ctx.Err()
	}
	tb := newToolbox(t, ts, map[string]toolFunc{"hang": hang})
	res := tb.submit(t, proposal(toolCall("t", "hang", nil, "timeout_ms", 50)))
	r := resultOf(t, res, "t")
	if r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "timed out after 50ms") {
		t.Fatalf("timeout: %s %q", r.Status, r.ErrorText())
	}
	var cancel protocol.ToolCancelParams
	select {
	case cancel = <-tb.cancel:
	case <-time.After(testTimeout):
		t.Fatal("no tools.cancel")
	}
	calls := tb.callLog()
	if cancel.RequestID != calls[0].RequestID || cancel.ActionID != "t" || !strings.Contains(cancel.Reason, "timed out") {
		t.Fatalf("cancel %+v for call %+v", cancel, calls[0])
	}
	if calls[0].TimeoutMs != 50 || calls[0].SessionID == "" || !strings.HasPrefix(calls[0].RequestID, "cb-") {
		t.Fatalf("callback params %+v", calls[0])
	}
}

func TestToolErrorsFailTheAction(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{
		"soft": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return map[string]any{"error": "disk full"}, nil
		},
		"hard": func(context.Context, protocol.ToolExecuteParams) (any, error) {
			return nil, errors.New("permission denied on /etc")
		},
	})
	for tool, want := range map[string]string{"soft": "disk full", "hard": "permission denied on /etc"} {
		res := tb.submit(t, proposal(toolCall("x", tool, nil)))
		if r := resultOf(t, res, "x"); r.Status != protocol.StatusFailed || r.ErrorText() != want {
			t.Fatalf("%s: %s %q", tool, r.Status, r.ErrorText())
		}
		if res.Cost.ActionsExecuted != 1 {
			t.Fatalf("a failed action counts as executed: %+v", res.Cost)
		}
	}
}

func TestSkipVersusAbortAndRollback(t *testing.T) {
	ts := startServer(t, Options{})
	fail := func(context.Context, protocol.ToolExecuteParams) (any, error) { return nil, errors.New("boom") }
	tb := newToolbox(t, ts, map[string]toolFunc{"fail": fail, "echo": echo})
	ctx := ctxT(t)
	if err := tb.Call(ctx, "state.set", map[string]any{"key": "counter", "value": 0}, nil); err != nil {
		t.Fatal(err)
	}

	// skip: the failing action is skipped, its dependents too, the rest runs.
	res := tb.submit(t, proposal(
		toolCall("f", "fail", nil, "failure_behavior", "skip"),
		toolCall("after-f", "echo", nil, "dependencies", []string{"f"}),
		toolCall("free", "echo", nil),
	))
	want := map[string]protocol.ActionStatus{"f": protocol.StatusSkipped, "after-f": protocol.StatusSkipped, "free": protocol.StatusSucceeded}
	if got := statuses(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("skip: %v", got)
	}
	if resultOf(t, res, "f").ErrorText() != "boom" {
		t.Fatalf("the skipped action keeps its error: %q", resultOf(t, res, "f").ErrorText())
	}

	// abort: state written earlier in the proposal is rolled back and what
	// had not started is skipped.
	res = tb.submit(t, proposal(
		map[string]any{"id": "w1", "type": "state_write", "parameters": map[string]any{"key": "counter", "value": 1}},
		map[string]any{"id": "w2", "type": "state_write", "parameters": map[string]any{"key": "fresh", "value": "x"}, "dependencies": []string{"w1"}},
		toolCall("f", "fail", nil, "dependencies", []string{"w2"}, "expected_effects", map[string]any{"never": true}),
		toolCall("later", "echo", nil, "dependencies", []string{"f"}),
	))
	want = map[string]protocol.ActionStatus{"w1": protocol.StatusSucceeded, "w2": protocol.StatusSucceeded, "f": protocol.StatusFailed, "later": protocol.StatusSkipped}
	if got := statuses(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("abort: %v", got)
	}
	if res.Cost.ActionsExecuted != 3 || res.Cost.ActionsSkipped != 1 {
		t.Fatalf("abort cost %+v", res.Cost)
	}
	var snap map[string]any
	if err := tb.Call(ctx, "state.snapshot", nil, &snap); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, map[string]any{"counter": float64(0)}) {
		t.Fatalf("state after rollback: %v", snap)
	}
	var rolled struct {
		Count int `json:"count"`
	}
	if err := tb.Call(ctx, "events.query", map[string]any{"kinds": []string{"state_rolled_back"}}, &rolled); err != nil || rolled.Count != 1 {
		t.Fatalf("rollback event: %+v %v", rolled, err)
	}
}

func TestPreconditionsAndBuiltInActions(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	ctx := ctxT(t)
	if err := tb.Call(ctx, "state.set", map[string]any{"key": "level", "value": 5}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.Call(ctx, "state.set", map[string]any{"key": "tags", "value": []any{"a", "b"}}, nil); err != nil {
		t.Fatal(err)
	}
	pre := func(op string, v any) []any { return []any{map[string]any{"key": "level", "operator": op, "value": v}} }
	res := tb.submit(t, proposal(
		toolCall("gt", "echo", nil, "preconditions", pre("gt", 4), "failure_behavior", "skip"),
		toolCall("lte", "echo", nil, "preconditions", pre("lte", 4), "failure_behavior", "skip"),
		toolCall("eq", "echo", nil, "preconditions", pre("eq", 5.0), "failure_behavior", "skip"),
		toolCall("weird", "echo", nil, "preconditions", pre("approximately", 5), "failure_behavior", "skip"),
		toolCall("has", "echo", nil, "preconditions", []any{map[string]any{"key": "tags", "operator": "contains", "value": "b"}}, "failure_behavior", "skip"),
		toolCall("absent", "echo", nil, "preconditions", []any{map[string]any{"key": "nope", "operator": "not_exists"}}, "failure_behavior", "skip"),
		map[string]any{"id": "read", "type": "state_read", "parameters": map[string]any{"keys": []any{"level", "nope"}}},
		map[string]any{"id": "check", "type": "assertion", "parameters": map[string]any{"key": "level", "operator": "gte", "value": 5}},
	))
	want := map[string]protocol.ActionStatus{
		"gt": protocol.StatusSucceeded, "lte": protocol.StatusRejected, "eq": protocol.StatusSucceeded,
		"weird": protocol.StatusRejected, "has": protocol.StatusSucceeded, "absent": protocol.StatusSucceeded,
		"read": protocol.StatusSucceeded, "check": protocol.StatusSucceeded,
	}
	if got := statuses(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("statuses %v", got)
	}
	if e := resultOf(t, res, "weird").ErrorText(); !strings.Contains(e, "unknown operator 'approximately'") {
		t.Fatalf("unknown operator: %q", e)
	}
	if out := mustJSON(resultOf(t, res, "read").Output); string(out) != `{"level":5,"nope":null}` {
		t.Fatalf("state_read output %s", out)
	}
	for _, c := range tb.callLog() {
		if c.ActionID == "lte" || c.ActionID == "weird" {
			t.Fatalf("an action whose precondition failed was dispatched: %s", c.ActionID)
		}
	}

	// A failed assertion aborts by default.
	res = tb.submit(t, proposal(map[string]any{"id": "must", "type": "assertion", "parameters": map[string]any{"key": "level", "value": 6}}))
	if r := resultOf(t, res, "must"); r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "assertion failed") {
		t.Fatalf("assertion: %s %q", r.Status, r.ErrorText())
	}
}

func TestValidationRejectsWithoutCallbacks(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	tb.register(t, echo, map[string]any{"name": "typed", "parameters": map[string]any{
		"type": "object", "required": []string{"path"}, "properties": map[string]any{"path": map[string]any{"type": "string"}}}})
	res := tb.submit(t, proposal(
		toolCall("unknown", "shel", nil),
		toolCall("after-unknown", "echo", nil, "dependencies", []string{"unknown"}),
		toolCall("c1", "echo", nil, "dependencies", []string{"c2"}),
		toolCall("c2", "echo", nil, "dependencies", []string{"c1"}),
		toolCall("self", "echo", nil, "dependencies", []string{"self"}),
		toolCall("ghost-dep", "echo", nil, "dependencies", []string{"nobody"}),
		toolCall("dup", "echo", nil),
		toolCall("dup", "echo", nil),
		toolCall("bad-params", "typed", map[string]any{"path": 7}),
		toolCall("fine", "typed", map[string]any{"path": "/tmp/x"}),
	))
	reasons := map[string]string{
		"unknown":       "unknown tool 'shel'; registered: echo, messaging.send, typed",
		"after-unknown": "depends on rejected action 'unknown'",
		"c1":            "dependency cycle among actions c1, c2",
		"c2":            "dependency cycle among actions c1, c2",
		"self":          "action 'self' depends on itself",
		"ghost-dep":     "depends on unknown action 'nobody'",
		"dup":           "duplicate action id 'dup'",
		"bad-params":    "parameters do not match the schema of tool 'typed'",
	}
	for _, r := range res.Results {
		want, rejected := reasons[r.ActionID]
		if !rejected {
			if r.Status != protocol.StatusSucceeded {
				t.Fatalf("%s: %s %s", r.ActionID, r.Status, r.ErrorText())
			}
			continue
		}
		if r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), want) {
			t.Fatalf("%s: %s %q, want rejected with %q", r.ActionID, r.Status, r.ErrorText(), want)
		}
	}
	calls := tb.callLog()
	if len(calls) != 1 || calls[0].ActionID != "fine" {
		t.Fatalf("only 'fine' may be dispatched, got %+v", calls)
	}
	if res.Cost.ActionsRejected != 9 || res.Cost.ActionsExecuted != 1 {
		t.Fatalf("cost %+v", res.Cost)
	}
}

func TestMalformedProposalIsInvalidParams(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	cases := []struct {
		proposal any
		contains string
	}{
		{nil, "param 'proposal' is required"},
		{map[string]any{}, "field 'actions' is required"},
		{map[string]any{"actions": []any{map[string]any{"id": "a", "type": "tool_call"}}}, "proposal.actions[0] (id 'a'): field 'tool' is required"},
		{map[string]any{"actions": []any{map[string]any{"id": "b", "type": "teleport"}}}, "(id 'b'): field 'type' must be one of"},
		{map[string]any{"actions": []any{map[string]any{"id": "c", "type": "tool_call", "tool": "echo", "max_retries": "3"}}}, "(id 'c'): field 'max_retries' must be a non-negative integer"},
		{map[string]any{"actions": []any{map[string]any{"id": "d", "type": "tool_call", "tool": "echo", "failure_behavior": "panic"}}}, "field 'failure_behavior' must be abort, retry or skip"},
		{map[string]any{"actions": []any{map[string]any{"type": "tool_call", "tool": "echo", "parameters": []any{}}}}, "proposal.actions[0]: field 'parameters' must be an object"},
		{map[string]any{"actions": []any{map[string]any{"id": "r", "type": "tool_call", "tool": "echo", "max_retries": 1000}}}, "field 'max_retries' must be at most 100"},
		{map[string]any{"actions": []any{map[string]any{"id": "t", "type": "tool_call", "tool": "echo", "timeout_ms": uint64(1) << 62}}}, "field 'timeout_ms' must be 1 to 86400000"},
		{[]any{}, "proposal: must be an ActionProposal object"},
	}
	for _, tc := range cases {
		err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": tc.proposal}, nil)
		code, msg := rpcCode(t, err)
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, tc.contains) {
			t.Errorf("got %d %q, want -32602 containing %q", code, msg, tc.contains)
		}
	}
	if len(tb.callLog()) != 0 {
		t.Fatal("a malformed proposal dispatched a tool")
	}
}

func TestDefaultsAndMintedIDs(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	var res protocol.ProposalResult
	err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{
		"actions": []any{map[string]any{"type": "tool_call", "tool": "echo", "unknown_field": 1}},
	}}, &res)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ProposalID) != 12 || len(res.Results[0].ActionID) != 12 || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("minted ids / unknown fields: %+v", res)
	}
	if calls := tb.callLog(); calls[0].TimeoutMs != 300000 || calls[0].Attempt != 1 {
		t.Fatalf("default budget: %+v", calls[0])
	}
}

func TestResultCacheAndRateLimit(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	tb.register(t, echo,
		map[string]any{"name": "cached", "cache_ttl_secs": 60},
		map[string]any{"name": "limited", "rate_limit": map[string]any{"max_calls": 1, "interval_secs": 0.02}},
	)
	res := tb.submit(t, proposal(
		toolCall("c1", "cached", map[string]any{"q": 1}),
		toolCall("c2", "cached", map[string]any{"q": 1}, "dependencies", []string{"c1"}),
		toolCall("c3", "cached", map[string]any{"q": 2}, "dependencies", []string{"c2"}),
		toolCall("l1", "limited", nil), toolCall("l2", "limited", nil), toolCall("l3", "limited", nil),
	))
	for id, st := range statuses(res) {
		if st != protocol.StatusSucceeded {
			t.Fatalf("%s %s", id, st)
		}
	}
	n := 0
	for _, c := range tb.callLog() {
		if c.Tool == "cached" {
			n++
		}
	}
	if n != 2 || res.Cost.ToolCalls != 5 {
		t.Fatalf("cached tool dispatched %d times (want 2), tool_calls %d", n, res.Cost.ToolCalls)
	}
}

func TestTenantScopedProposal(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	var res protocol.ProposalResult
	err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{
		"proposal": proposal(map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": "v"}}),
		"scope":    map[string]any{"tenantId": "acme"},
	}, &res)
	if err != nil || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("%v %+v", err, res)
	}
	var v any
	if err := tb.Call(ctxT(t), "state.get", map[string]any{"key": "k"}, &v); err != nil || v != nil {
		t.Fatalf("tenant write leaked into the unscoped namespace: %v %v", v, err)
	}
	if err := tb.Call(ctxT(t), "state.get", map[string]any{"key": "k", "tenant_id": "acme"}, &v); err != nil || v != "v" {
		t.Fatalf("tenant value %v %v", v, err)
	}
}

func TestReferencesThatResolveToTheWrongTypeAreRejectedNotFatal(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"echo": echo})
	res := tb.submit(t, proposal(
		map[string]any{"id": "a1", "type": "state_write", "parameters": map[string]any{"key": "n", "value": 5}},
		map[string]any{"id": "a2", "type": "state_write", "parameters": map[string]any{"key": "$a1.output"}, "failure_behavior": "skip"},
		map[string]any{"id": "a3", "type": "assertion", "parameters": map[string]any{"key": "$a1.output"}, "failure_behavior": "skip"},
		map[string]any{"id": "a4", "type": "state_read", "parameters": map[string]any{"keys": []any{"$a1.output"}}, "failure_behavior": "skip"},
	))
	for _, id := range []string{"a2", "a3", "a4"} {
		if r := resultOf(t, res, id); r.Status != protocol.StatusSkipped && r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "with its references resolved") {
			t.Fatalf("%s: %s %q", id, r.Status, r.ErrorText())
		}
	}
	var keys []string
	mustCall(t, tb, "state.keys", nil, &keys) // the daemon is alive
	if strings.Join(keys, ",") != "n" {
		t.Fatalf("keys %v", keys)
	}
}
