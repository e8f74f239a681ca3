package rpc

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

func TestASingleUseApprovalRunsOnceAndSaysWhatItAllowed(t *testing.T) {
	ts := startGovernedServer(t, 0)
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	approver := ts.dial(t, "")
	ship := toolCall("ship", "deploy_service", map[string]any{"env": "prod"})

	var rec approvals.Record
	if err := approver.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": ship, "uses": 1, "expires_in": 3600}, &rec); err != nil {
		t.Fatal(err)
	}
	var want approvals.Record
	approvals.Operation(&want, &protocol.Action{Type: "tool_call", Tool: "deploy_service", Parameters: map[string]any{"env": "prod"}})
	if rec.Uses != 1 || rec.Used != 0 || rec.ExpiresAt == nil || rec.Type != "tool_call" || rec.Tool != "deploy_service" ||
		rec.ParamsDigest != want.ParamsDigest || rec.GrantedTier != "" || rec.RequiredTier != "full_access" || !strings.HasPrefix(rec.Reviewer, "conn:") {
		t.Fatalf("the record does not say what it allowed: %+v", rec)
	}
	var recorded protocol.EventsQueryResult
	mustCall(t, runner, protocol.MethodEventsQuery, protocol.EventsQueryParams{Kinds: []protocol.EventKind{engine.EventApprovalRecorded}}, &recorded)
	if len(recorded.Events) != 1 {
		t.Fatalf("%d approval_recorded events, want 1", len(recorded.Events))
	}
	ev := recorded.Events[0].Data
	if ev["tool"] != "deploy_service" || ev["type"] != "tool_call" || ev["params_digest"] != want.ParamsDigest || ev["granted_tier"] != "" ||
		ev["required_tier"] != "full_access" || ev["reviewer"] != rec.Reviewer || ev["uses"] != float64(1) || ev["expires_at"] == nil {
		t.Fatalf("the approval_recorded event does not say what was allowed: %v", ev)
	}
	if res := runner.submit(t, proposal(ship)); res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the first use: %s %q", res.Results[0].Status, res.Results[0].ErrorText())
	}
	res := runner.submit(t, proposal(ship))
	if res.Results[0].Status != protocol.StatusRejected || !strings.Contains(res.Results[0].ErrorText(), "approve fingerprint") {
		t.Fatalf("a spent single-use approval let the operation through again: %s %q", res.Results[0].Status, res.Results[0].ErrorText())
	}
	if n := len(runner.callLog()); n != 1 {
		t.Fatalf("the tool ran %d times under a single-use approval, want 1", n)
	}
}

func TestTwoProposalsRacingForASingleUseApprovalRunOnce(t *testing.T) {
	ts := startGovernedServer(t, 0)
	a := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	b := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	approver := ts.dial(t, "")
	ship := toolCall("ship", "deploy_service", map[string]any{"env": "prod"})
	if err := approver.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"action": ship, "uses": 1}, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]protocol.ProposalResult, 2)
	errs := make([]error, 2)
	for i, tb := range []*toolbox{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := proposal(ship)
			p["id"] = []string{"p-a", "p-b"}[i]
			errs[i] = tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": p}, &results[i])
		}()
	}
	wg.Wait()
	ran := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if results[i].Results[0].Status == protocol.StatusSucceeded {
			ran++
		}
	}
	if ran != 1 || len(a.callLog())+len(b.callLog()) != 1 {
		t.Fatalf("%d proposals ran (tool calls %d + %d) under a single-use approval; want exactly 1", ran, len(a.callLog()), len(b.callLog()))
	}
}

func TestApprovalLimitsOutOfRangeAreRefused(t *testing.T) {
	ts := startGovernedServer(t, 0)
	approver := ts.dial(t, "")
	base := map[string]any{"fingerprint": strings.Repeat("a", 32), "required_tier": "full_access"}
	for _, c := range []struct {
		method string
		extra  map[string]any
		want   string
	}{
		{protocol.MethodPermissionApprove, map[string]any{"uses": 0, "expires_in": -1}, "expires_in"},
		{protocol.MethodPermissionApprove, map[string]any{"expires_in": approvals.MaxExpiresIn + 1}, "expires_in"},
		{protocol.MethodPermissionApprove, map[string]any{"uses": -1}, "uses"},
		{protocol.MethodPermissionApprove, map[string]any{"uses": approvals.MaxUses + 1}, "uses"},
		{protocol.MethodPermissionReject, map[string]any{"uses": 1}, "rejection"},
	} {
		params := map[string]any{}
		for k, v := range base {
			params[k] = v
		}
		for k, v := range c.extra {
			params[k] = v
		}
		code, msg := rpcCode(t, approver.Call(ctxT(t), c.method, params, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: %d %q; want -32602 naming %s", c.method, c.extra, code, msg, c.want)
		}
	}
	code, msg := rpcCode(t, approver.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": "x", "approved": true, "uses": approvals.MaxUses + 1}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "uses") {
		t.Errorf("host.resolve_approval with uses past the bound: %d %q", code, msg)
	}
	if got := len(ts.rt.Approvals().List()); got != 0 {
		t.Fatalf("a refused decision reached the ledger: %d records", got)
	}
}

func TestAnExpiredApprovalIsGoneAndTheOperationAsksAgain(t *testing.T) {
	ts := startGovernedServer(t, 0)
	runner := newToolbox(t, ts, map[string]toolFunc{"deploy_service": echo})
	ship := toolCall("ship", "deploy_service", map[string]any{"env": "prod"})
	res := runner.submit(t, proposal(ship))
	m := fingerprintRE.FindStringSubmatch(res.Results[0].ErrorText())
	if m == nil {
		t.Fatalf("no fingerprint to approve in %q", res.Results[0].ErrorText())
	}
	past := time.Now().Add(-time.Second)
	if _, err := ts.rt.Approvals().Record(approvals.Record{Fingerprint: m[1], Decision: approvals.Approved, RequiredTier: "full_access", Reviewer: "conn:x", ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	res = runner.submit(t, proposal(ship))
	if res.Results[0].Status != protocol.StatusRejected || !strings.Contains(res.Results[0].ErrorText(), "approve fingerprint "+m[1]) {
		t.Fatalf("an expired approval let the operation through: %s %q", res.Results[0].Status, res.Results[0].ErrorText())
	}
	if n := len(runner.callLog()); n != 0 {
		t.Fatalf("the tool ran %d times under an expired approval", n)
	}
}
