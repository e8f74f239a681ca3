package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// A proposal waiting for a person when the daemon is told to stop is
// answered at once, saying the daemon is stopping and what to approve; the
// stop does not wait out its grace (ten minutes here, against a wait of
// waitLimit). After the restart the request is listed as expired, "daemon
// restarted", with its fingerprint, and approving that fingerprint lets the
// resubmission run.
func TestShutdownAnswersParkedProposalsAndTheRestartListsThem(t *testing.T) {
	home := t.TempDir()
	d := startDaemon(t, home, "CAR_SHUTDOWN_GRACE=10m")
	person := d.dial(t)
	defer person.Close()
	if err := person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	runner := d.dial(t)
	defer runner.Close()
	runner.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"deployed": true}, nil
	})
	if err := runner.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "deploy_service"}}, nil); err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"proposal": map[string]any{"actions": []any{
		map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}},
	}}}
	done := make(chan error, 1)
	var res protocol.ProposalResult
	go func() { done <- runner.Call(ctxT(t), protocol.MethodProposalSubmit, plan, &res) }()
	var waiting host.Approval
	testwait.Eventually(t, waitLimit, "the proposal's approval request", func() bool {
		var list protocol.HostApprovalsResult
		if err := person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil || len(list.Approvals) == 0 {
			return false
		}
		waiting = list.Approvals[0]
		return true
	})
	fp, _ := waiting.Context["fingerprint"].(string)
	if fp == "" {
		t.Fatalf("the request names no fingerprint: %+v", waiting)
	}

	stopped := time.Now()
	d.stop(t) // fails the test unless the daemon exits within waitLimit, far short of the grace
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the parked proposal got an error instead of its result: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the parked proposal was not answered")
	}
	msg := res.Results[0].Error
	if res.Results[0].Status == protocol.StatusSucceeded || msg == nil || !strings.Contains(*msg, "the daemon is stopping") || !strings.Contains(*msg, fp) || !strings.Contains(*msg, "resubmit") {
		t.Fatalf("the parked action's answer does not say the daemon is stopping, the fingerprint and what to do: %+v", res.Results[0])
	}
	t.Logf("stopped in %s with a grace of 10m", time.Since(stopped).Round(time.Millisecond))

	d = startDaemon(t, home)
	person = d.dial(t)
	defer person.Close()
	var list protocol.HostApprovalsResult
	if err := person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 {
		t.Fatalf("after the restart %d requests are listed, want the interrupted one: %+v", len(list.Approvals), list.Approvals)
	}
	got := list.Approvals[0]
	if got.ID != waiting.ID || got.Status != host.ApprovalExpired || got.Notes != "expired: daemon restarted" || got.Context["fingerprint"] != fp || got.Title != waiting.Title {
		t.Fatalf("the interrupted request after the restart: %+v", got)
	}
	// The person approves the operation; the agent's resubmission runs.
	if err := person.Call(ctxT(t), protocol.MethodPermissionApprove, map[string]any{"fingerprint": fp, "required_tier": "full_access"}, nil); err != nil {
		t.Fatal(err)
	}
	runner = d.dial(t)
	defer runner.Close()
	runner.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"deployed": true}, nil
	})
	if err := runner.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "deploy_service"}}, nil); err != nil {
		t.Fatal(err)
	}
	res = protocol.ProposalResult{}
	if err := runner.Call(ctxT(t), protocol.MethodProposalSubmit, plan, &res); err != nil || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("the resubmission after the approval: %v %+v", err, res.Results)
	}
}
