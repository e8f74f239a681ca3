package rpc

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

func mustCall(t *testing.T, tb *toolbox, method string, params, out any) {
	t.Helper()
	if err := tb.Call(ctxT(t), method, params, out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func submitIn(t *testing.T, tb *toolbox, sessionID string, actions ...map[string]any) protocol.ProposalResult {
	t.Helper()
	var res protocol.ProposalResult
	mustCall(t, tb, protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(actions...), "session_id": sessionID}, &res)
	return res
}

func TestPolicyLayers(t *testing.T) {
	ts := startServer(t, Options{})
	ts.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "deny_tool:stage_site", Rule: policy.DenyTool{Tool: "stage_site"}}))
	tools := map[string]toolFunc{"runner": echo, "stage_site": echo, "read": echo}
	a := newToolbox(t, ts, tools)
	b := newToolbox(t, ts, tools)

	// Connection A denies rm -rf in shell; B is untouched by it.
	var reg map[string]any
	mustCall(t, a, protocol.MethodPolicyRegister, map[string]any{"name": "no_rm", "rule": "deny_tool_param", "target": "runner", "key": "target", "pattern": "/tmp/build"}, &reg)
	if reg["name"] != "no_rm" || reg["registered"] != "no_rm" || reg["scope"] != "global" {
		t.Fatalf("register reply %v", reg)
	}
	rm := toolCall("x", "runner", map[string]any{"target": "/tmp/build/out"}, "failure_behavior", "skip")
	if r := submitIn(t, a, "", rm); r.Results[0].Status != protocol.StatusRejected ||
		r.Results[0].ErrorText() != "denied by connection policy 'no_rm': parameter 'target' of tool 'runner' contains a denied pattern" {
		t.Fatalf("A: %+v %q", r.Results[0].Status, r.Results[0].ErrorText())
	}
	if r := submitIn(t, b, "", rm); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("A's rule touched B: %s", r.Results[0].ErrorText())
	}
	// Nobody can allow what the operator denies.
	for _, tb := range []*toolbox{a, b} {
		r := submitIn(t, tb, "", toolCall("d", "stage_site", nil))
		if r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "denied by operator policy 'deny_tool:stage_site'") {
			t.Fatalf("operator rule: %q", r.Results[0].ErrorText())
		}
	}
	// A sub-session narrows the connection: it denies read, the connection doesn't.
	var open map[string]string
	mustCall(t, a, protocol.MethodSessionPolicyOpen, nil, &open)
	sid := open["session_id"]
	mustCall(t, a, protocol.MethodPolicyRegister, map[string]any{"name": "no_read", "rule": "deny_tool", "target": "read", "session_id": sid}, &reg)
	if !reflect.DeepEqual(reg["scope"], map[string]any{"session_id": sid}) {
		t.Fatalf("scope %v", reg["scope"])
	}
	read := toolCall("r", "read", nil)
	if r := submitIn(t, a, sid, read); r.Results[0].Status != protocol.StatusRejected {
		t.Fatal("the sub-session's rule did not apply")
	}
	if r := submitIn(t, a, "", read); r.Results[0].Status != protocol.StatusSucceeded {
		t.Fatal("the sub-session's rule leaked to the connection")
	}
	// The connection's and operator's layers apply inside the sub-session too.
	if r := submitIn(t, a, sid, rm); r.Results[0].Status != protocol.StatusRejected {
		t.Fatal("connection layer skipped inside a sub-session")
	}
	// B cannot use, list or change A's sub-session.
	r := submitIn(t, b, sid, read)
	if r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "not an open policy session of this connection") {
		t.Fatalf("B used A's session: %q", r.Results[0].ErrorText())
	}
	code, _ := rpcCode(t, b.Call(ctxT(t), protocol.MethodPolicyUnregister, map[string]any{"name": "no_read", "session_id": sid}, nil))
	if code != protocol.CodeInvalidParams {
		t.Fatalf("B unregistering in A's session: %d", code)
	}

	var list struct {
		Policies []protocol.PolicyInfo `json:"policies"`
		Scope    any                   `json:"scope"`
	}
	mustCall(t, a, protocol.MethodPolicyList, map[string]any{"session_id": sid}, &list)
	var got []string
	for _, p := range list.Policies {
		got = append(got, p.Layer+":"+p.Name)
	}
	if strings.Join(got, ",") != "operator:deny_tool:stage_site,connection:no_rm,session:no_read" {
		t.Fatalf("policy.list %v", got)
	}
	mustCall(t, b, protocol.MethodPolicyList, nil, &list)
	if len(list.Policies) != 1 {
		t.Fatalf("B sees A's rules: %+v", list.Policies)
	}

	// Closing drops the sub-session and its rules; closing again is fine.
	var closed map[string]bool
	mustCall(t, a, protocol.MethodSessionPolicyClose, map[string]any{"session_id": sid}, &closed)
	if !closed["closed"] {
		t.Fatal("close reported false for an open session")
	}
	mustCall(t, a, protocol.MethodSessionPolicyClose, map[string]any{"session_id": sid}, &closed)
	if closed["closed"] {
		t.Fatal("second close reported true")
	}
	if r := submitIn(t, a, sid, read); r.Results[0].Status != protocol.StatusRejected {
		t.Fatal("a closed session id was accepted")
	}

	var un map[string]any
	mustCall(t, a, protocol.MethodPolicyUnregister, map[string]any{"name": "no_rm"}, &un)
	if un["removed"] != float64(1) {
		t.Fatalf("unregister %v", un)
	}
	mustCall(t, a, protocol.MethodPolicyUnregister, map[string]any{"name": "no_rm"}, &un)
	if un["removed"] != float64(0) {
		t.Fatalf("second unregister %v", un)
	}
}

func TestPolicyDenialOutcomes(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"runner": echo, "read": echo})
	mustCall(t, tb, protocol.MethodPolicyRegister, map[string]any{"name": "no_runner", "rule": "deny_tool", "target": "runner"}, nil)
	mustCall(t, tb, protocol.MethodPolicyRegister, map[string]any{"name": "gate", "rule": "require_state", "key": "ready", "value": true}, nil)
	mustCall(t, tb, "state.set", map[string]any{"key": "ready", "value": true}, nil)

	// retry counts as abort: the rest is skipped, state rolled back, no callback.
	res := tb.submit(t, proposal(
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "k", "value": 1}},
		toolCall("s", "runner", nil, "dependencies", []string{"w"}, "failure_behavior", "retry"),
		toolCall("r", "read", nil, "dependencies", []string{"s"}),
	))
	want := map[string]protocol.ActionStatus{"w": protocol.StatusSucceeded, "s": protocol.StatusRejected, "r": protocol.StatusSkipped}
	if got := statuses(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("retry-as-abort: %v", got)
	}
	var exists bool
	mustCall(t, tb, "state.exists", map[string]any{"key": "k"}, &exists)
	if exists || len(tb.callLog()) != 0 {
		t.Fatalf("after a denied abort: k exists=%v, calls %d", exists, len(tb.callLog()))
	}

	// A reference cannot smuggle a denied value past a rule.
	mustCall(t, tb, protocol.MethodPolicyRegister, map[string]any{"name": "no_rm", "rule": "deny_tool_param", "target": "read", "key": "path", "pattern": "/etc/shadow"}, nil)
	mustCall(t, tb, "state.set", map[string]any{"key": "target", "value": "/etc/shadow"}, nil)
	res = tb.submit(t, proposal(
		map[string]any{"id": "get", "type": "state_read", "parameters": map[string]any{"key": "target"}},
		toolCall("leak", "read", map[string]any{"path": "$get.output"}),
	))
	if r := resultOf(t, res, "leak"); r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "no_rm") {
		t.Fatalf("reference bypassed the policy: %s %q", r.Status, r.ErrorText())
	}

	// require_state: flipping the flag denies everything.
	mustCall(t, tb, "state.set", map[string]any{"key": "ready", "value": false}, nil)
	res = tb.submit(t, proposal(toolCall("r2", "read", nil)))
	if r := res.Results[0]; r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "state 'ready' must be true") {
		t.Fatalf("require_state: %q", r.ErrorText())
	}

	var q struct {
		Count  int            `json:"count"`
		Events []engine.Event `json:"events"`
	}
	mustCall(t, tb, protocol.MethodEventsQuery, map[string]any{"kinds": []string{"policy_violation"}}, &q)
	if q.Count != 3 || q.Events[0].Data["policy_name"] != "gate" || q.Events[0].Data["layer"] != "connection" {
		t.Fatalf("violation events %+v", q.Events)
	}
}

func TestSessionInitRegistersPolicies(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, map[string]toolFunc{"runner": echo})
	var res protocol.SessionInitResult
	mustCall(t, tb, protocol.MethodSessionInit, map[string]any{
		"tools":    []any{map[string]any{"name": "runner"}},
		"policies": []any{map[string]any{"name": "no_runner", "rule": "deny_tool", "target": "runner"}},
	}, &res)
	if res.PoliciesRegistered != 1 || res.ToolsRegistered != 1 {
		t.Fatalf("%+v", res)
	}
	r := tb.submit(t, proposal(toolCall("s", "runner", nil)))
	if r.Results[0].Status != protocol.StatusRejected || !strings.Contains(r.Results[0].ErrorText(), "policy 'no_runner'") {
		t.Fatal("policy from session.init not enforced")
	}
	code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodSessionInit, map[string]any{
		"tools":    []any{map[string]any{"name": "other"}},
		"policies": []any{map[string]any{"name": "bad", "rule": "deny_tool"}},
	}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "needs field 'target'") {
		t.Fatalf("%d %q", code, msg)
	}
	var list protocol.ToolsListResult
	mustCall(t, tb, protocol.MethodToolsList, nil, &list)
	if list.Count != 2 {
		t.Fatalf("a refused session.init registered tools anyway: %+v", list.Tools)
	}
}

func TestEveryRetryPassesThePoliciesAgain(t *testing.T) {
	ts := startServer(t, Options{})
	ts.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "rate_limit_tool:flaky_call", Rule: &policy.RateLimitTool{Tool: "flaky_call", MaxCalls: 2, Interval: time.Hour}}))
	calls := 0
	tb := newToolbox(t, ts, map[string]toolFunc{"flaky_call": func(context.Context, protocol.ToolExecuteParams) (any, error) {
		calls++
		return nil, errors.New("upstream down")
	}})
	res := tb.submit(t, proposal(toolCall("f", "flaky_call", nil, "failure_behavior", "retry", "max_retries", 5)))
	r := res.Results[0]
	if calls != 2 || r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "retry 3 refused") || !strings.Contains(r.ErrorText(), "rate limit") {
		t.Fatalf("calls %d, %s %q", calls, r.Status, r.ErrorText())
	}
}
