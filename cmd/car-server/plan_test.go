package main

import (
	"strings"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// TestPlanningOverTheRealDaemon: proposal.score ranks without running
// anything; proposal.plan's best candidate, a deploy that needs a person,
// parks on the same desk a proposal.submit does and runs once approved;
// refused, it ends the plan, and the next-best candidate never runs.
// Past max_plan_candidates the call is refused before anything runs.
func TestPlanningOverTheRealDaemon(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "CAR_MAX_PLAN_CANDIDATES=2")
	dd := newDeployDesk(t, d)
	deploy := map[string]any{"id": "plan-deploy", "actions": []any{
		map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}}}}
	broken := map[string]any{"id": "plan-broken", "actions": []any{map[string]any{"id": "x", "type": "tool_call", "tool": "no_such_tool"}}}
	note := map[string]any{"id": "plan-note", "actions": []any{
		map[string]any{"id": "w", "type": "state_write", "parameters": map[string]any{"key": "noted", "value": true}}}}

	var scored protocol.ScoreResult
	if err := dd.runner.Call(ctxT(t), protocol.MethodProposalScore, map[string]any{"candidates": []any{broken, deploy}}, &scored); err != nil {
		t.Fatal(err)
	}
	if len(scored.Ranking) != 1 || scored.Ranking[0] != 1 || scored.Scores[0].Valid || !scored.Scores[1].Valid {
		t.Fatalf("proposal.score: %+v", scored)
	}

	// Approved: the plan waits for the person, then runs the deploy.
	done, res := make(chan error, 1), &protocol.PlanResult{}
	go func() {
		done <- dd.runner.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{broken, deploy}}, res)
	}()
	waiting := dd.pending(t, "")
	yes := true
	if err := dd.person.Call(ctxT(t), protocol.MethodHostResolveApproval, protocol.HostResolveParams{ApprovalID: waiting.ID, Approved: &yes}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || res.Chosen != 1 || len(res.Attempts) != 1 || res.Attempts[0].Status != protocol.PlanSucceeded ||
			len(res.Result.Results) != 1 || res.Result.Results[0].Status != protocol.StatusSucceeded {
			t.Fatalf("plan after the approval: %v %+v", err, res)
		}
	case <-time.After(waitLimit):
		t.Fatal("the plan did not finish after the approval")
	}

	// Refused: the plan ends with the deploy rejected, and the candidate
	// that ties with it (a state write) does not run in its place.
	deploy["id"] = "plan-deploy-again"
	deploy["actions"].([]any)[0].(map[string]any)["parameters"] = map[string]any{"env": "prod", "version": 2}
	go func() {
		done <- dd.runner.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{deploy, note}}, res)
	}()
	refused := dd.pending(t, waiting.ID)
	no := false
	if err := dd.person.Call(ctxT(t), protocol.MethodHostResolveApproval, protocol.HostResolveParams{ApprovalID: refused.ID, Approved: &no, Notes: "not today"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || res.Chosen != 0 || len(res.Attempts) != 1 || res.Attempts[0].Status != protocol.PlanRejected ||
			res.Result.Results[0].Status != protocol.StatusRejected || !strings.Contains(res.Result.Results[0].ErrorText(), "not today") {
			t.Fatalf("plan after the refusal: %v %+v", err, res)
		}
	case <-time.After(waitLimit):
		t.Fatal("the plan did not finish after the refusal")
	}
	var noted any
	if err := dd.runner.Call(ctxT(t), protocol.MethodStateGet, map[string]any{"key": "noted"}, &noted); err != nil || noted != nil {
		t.Fatalf("the next-best candidate ran after a refusal: %v %v", noted, err)
	}

	err := dd.runner.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{note, note, note}}, nil)
	if err == nil || !strings.Contains(err.Error(), "at most 2 are scored at once (max_plan_candidates)") {
		t.Fatalf("three candidates with max_plan_candidates 2: %v", err)
	}
}
