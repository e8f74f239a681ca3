package rpc

import (
	"math"
	"strings"
	"testing"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// submitWith sends a proposal with params beside it (scope, session_id).
func submitWith(t *testing.T, tb *toolbox, p map[string]any, extra map[string]any) protocol.ProposalResult {
	t.Helper()
	params := map[string]any{"proposal": p}
	for k, v := range extra {
		params[k] = v
	}
	var res protocol.ProposalResult
	if err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, params, &res); err != nil {
		t.Fatalf("proposal.submit: %v", err)
	}
	return res
}

// TestScopeCallerAndClaimsAreRecordedAndGoverned: a plain client's
// callerId and claims are on the proposal's events; policies read them;
// an agent's caller is always itself, and its own claims can make a rule
// deny but never allow.
func TestScopeCallerAndClaimsAreRecordedAndGoverned(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	trustAgents(t, rs)
	rs.rt.SetOperatorPolicies(policy.NewEngine(
		policy.Policy{Name: "report-needs-admin", Rule: policy.RequireClaim{Claim: "role", Tool: "read_report", Value: "admin", HasValue: true}},
		policy.Policy{Name: "no-prod-search", Rule: policy.DenyToolParam{Tool: "search", Param: "scope.claims.env", Contains: "prod"}},
	))
	tools := integrityTools()
	tools["read_report"] = echo
	plain := newToolbox(t, rs.testServer, tools)
	admin := map[string]any{"scope": map[string]any{"callerId": "a2a:carol", "claims": map[string]any{"role": "admin", "env": "staging"}}}

	p := proposal(toolCall("d", "read_report", map[string]any{"to": "staging"}))
	p["id"] = "p-admin"
	if r := resultOf(t, submitWith(t, plain, p, admin), "d"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("a trusted admin claim: %s %s", r.Status, r.ErrorText())
	}
	got := eventOf(t, plain.Client, map[string]any{"kinds": []string{string(engine.EventProposalReceived)}, "proposal_id": "p-admin"})
	claims, _ := got.Data["claims"].(map[string]any)
	if got.Data["caller"] != "a2a:carol" || claims["role"] != "admin" || got.Data["claims_trusted"] != true {
		t.Fatalf("proposal_received data %v: want the caller and the claims", got.Data)
	}
	if ev := eventOf(t, plain.Client, map[string]any{"kinds": []string{string(engine.EventActionSucceeded)}, "proposal_id": "p-admin"}); ev.Data["caller"] != "a2a:carol" {
		t.Fatalf("action_succeeded data %v: want the caller", ev.Data)
	}
	if st := statuses(submitWith(t, plain, proposal(toolCall("d", "read_report", nil)), nil)); st["d"] != protocol.StatusRejected {
		t.Fatalf("no claim: %v", st)
	}
	res := submitWith(t, plain, proposal(toolCall("s", "search", nil)), map[string]any{"scope": map[string]any{"claims": map[string]any{"env": "prod-eu"}}})
	if m := resultOf(t, res, "s"); m.Status != protocol.StatusRejected || !strings.Contains(m.ErrorText(), "no-prod-search") {
		t.Fatalf("a deny pattern over scope.claims.env: %s %s", m.Status, m.ErrorText())
	}

	alice := newToolboxOn(t, rs.mustAgent(t, "alice"), tools)
	code, msg := rpcCode(t, alice.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(toolCall("d", "read_report", nil)), "scope": map[string]any{"callerId": "bob"}}, nil))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "may not submit as callerId 'bob'") {
		t.Fatalf("an agent naming another caller: %d %s", code, msg)
	}
	// proposal.plan runs its candidates as proposal.submit would, scope
	// included.
	code, msg = rpcCode(t, alice.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{proposal(toolCall("d", "read_report", nil))}, "scope": map[string]any{"callerId": "bob"}}, nil))
	if code != protocol.CodeApprovalDenied || !strings.Contains(msg, "may not submit as callerId 'bob'") {
		t.Fatalf("an agent's plan naming another caller: %d %s", code, msg)
	}
	own := map[string]any{"scope": map[string]any{"callerId": "alice", "claims": map[string]any{"role": "admin", "env": "prod"}}}
	ap := proposal(toolCall("d", "read_report", nil), toolCall("s", "search", nil))
	ap["id"] = "p-alice"
	st := statuses(submitWith(t, alice, ap, own))
	if st["d"] != protocol.StatusRejected || st["s"] != protocol.StatusRejected {
		t.Fatalf("an agent's own claims: %v; want deploy rejected (its admin claim is not trusted) and search rejected (its prod claim denies)", st)
	}
	v := resultOf(t, submitWith(t, alice, proposal(toolCall("d", "read_report", nil)), own), "d")
	if !strings.Contains(v.ErrorText(), "an agent's own claims do not count") {
		t.Fatalf("the refusal says why: %s", v.ErrorText())
	}
	got = eventOf(t, alice.Client, map[string]any{"kinds": []string{string(engine.EventProposalReceived)}, "proposal_id": "p-alice"})
	if _, has := got.Data["caller"]; has || got.Data["agent"] != "alice" || got.Data["claims_trusted"] != false {
		t.Fatalf("an agent's proposal_received %v: the agent is its caller (agent alone), its claims untrusted", got.Data)
	}
}

// TestScopeBounds: claims within max_scope_claims_bytes and a callerId
// within MaxCallerIDBytes are served; one byte past is refused.
func TestScopeBounds(t *testing.T) {
	fits := map[string]any{"k": "1234567890"}
	most := jsonvalue.Size(fits, math.MaxInt64)
	ts := startServer(t, Options{MaxScopeClaimsBytes: int(most)})
	tb := newToolbox(t, ts, integrityTools())
	submitWith(t, tb, proposal(toolCall("r", "read_notes", nil)), map[string]any{"scope": map[string]any{"claims": fits, "callerId": strings.Repeat("c", MaxCallerIDBytes)}})
	for _, bad := range []struct {
		scope map[string]any
		want  string
	}{
		{map[string]any{"claims": map[string]any{"k": "12345678901"}}, "max_scope_claims_bytes"},
		{map[string]any{"claims": map[string]any{"": 1}}, "non-empty name"},
		{map[string]any{"callerId": strings.Repeat("c", MaxCallerIDBytes+1)}, "at most 256 bytes"},
	} {
		code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": proposal(toolCall("r", "read_notes", nil)), "scope": bad.scope}, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, bad.want) {
			t.Errorf("%v: %d %s; want -32602 with %q", bad.scope, code, msg, bad.want)
		}
	}
	if n := len(tb.callLog()); n != 1 {
		t.Fatalf("refused proposals ran: %d calls, want the one that fit", n)
	}
}

// TestSessionIDAndScopeApplyTogether: with both session_id and a scope's
// tenantId, the sub-session's policies apply and state is the tenant's.
func TestSessionIDAndScopeApplyTogether(t *testing.T) {
	ts := startServer(t, Options{})
	tb := newToolbox(t, ts, integrityTools())
	var open protocol.SessionPolicyOpenResult
	mustCall(t, tb, protocol.MethodSessionPolicyOpen, nil, &open)
	mustCall(t, tb, protocol.MethodPolicyRegister, map[string]any{"name": "no-search-here", "rule": "deny_tool", "target": "search", "session_id": open.SessionID}, nil)
	both := map[string]any{"session_id": open.SessionID, "scope": map[string]any{"tenantId": "acme"}}
	if st := statuses(submitWith(t, tb, proposal(toolCall("s", "search", nil)), both)); st["s"] != protocol.StatusRejected {
		t.Fatalf("session policy with a tenant: %v; want search denied by the session's policy", st)
	}
	if st := statuses(submitWith(t, tb, proposal(stateWrite("w", "owner", "acme-team")), both)); st["w"] != protocol.StatusSucceeded {
		t.Fatalf("a write with session_id and a tenant: %v", st)
	}
	var inTenant, unscoped any
	mustCall(t, tb, protocol.MethodStateGet, map[string]any{"key": "owner", "tenant_id": "acme"}, &inTenant)
	mustCall(t, tb, protocol.MethodStateGet, map[string]any{"key": "owner"}, &unscoped)
	if inTenant != "acme-team" || unscoped != nil {
		t.Fatalf("the write landed in tenant %v / unscoped %v; want it in acme's view only", inTenant, unscoped)
	}
	if st := statuses(submitWith(t, tb, proposal(toolCall("s", "search", nil)), map[string]any{"scope": map[string]any{"tenantId": "acme"}})); st["s"] != protocol.StatusSucceeded {
		t.Fatalf("without session_id the session's policy does not apply: %v", st)
	}
}
