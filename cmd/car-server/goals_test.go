package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// dialAgent connects to the daemon bound to agent with its token.
func (d *daemon) dialAgent(t *testing.T, agent, token string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), "ws://"+d.addr+"/", &client.Options{Token: token, AgentID: agent})
	if err != nil {
		t.Fatalf("bind %s: %v", agent, err)
	}
	return c
}

// alertsOf asks metrics.alerts with max_goals_ungrounded and returns it.
func alertsOf(t *testing.T, c *client.Client, most int) protocol.MetricsAlertsResult {
	t.Helper()
	var res protocol.MetricsAlertsResult
	if err := c.Call(ctxT(t), protocol.MethodMetricsAlerts, map[string]any{"max_goals_ungrounded": most}, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGoalVerdictsOutliveACrashAndFireTheAlert: the real daemon records an
// agent's goal verdict and turn decision in its run, durably before the
// reply; after a SIGKILL and a start, metrics.summary still counts the
// ungrounded goal and metrics.alerts still fires goal_ungrounded.
func TestGoalVerdictsOutliveACrashAndFireTheAlert(t *testing.T) {
	home := t.TempDir()
	token := issueAgentToken(t, home, "alice")
	d := startDaemon(t, home)
	alice := d.dialAgent(t, "alice", token)
	var run protocol.RunsStartResult
	if err := alice.Call(ctxT(t), protocol.MethodRunsStart, map[string]any{"intent": "make the tests pass"}, &run); err != nil {
		t.Fatal(err)
	}
	plain := d.dial(t)
	if err := plain.Call(ctxT(t), protocol.MethodStateSet, map[string]any{"key": "ci", "value": "green"}, nil); err != nil {
		t.Fatal(err)
	}
	var verdict protocol.GoalsEvaluateResult
	goal := map[string]any{"type": "all_of", "conditions": []any{
		map[string]any{"type": "state_predicate", "key": "ci", "value": "green"},
		map[string]any{"type": "model_judge", "prompt": "is the code good?"},
	}}
	if err := alice.Call(ctxT(t), protocol.MethodGoalsEvaluate, map[string]any{"goal": goal}, &verdict); err != nil {
		t.Fatal(err)
	}
	if verdict.Met || verdict.Grounded || strings.Join(verdict.Underivable, ",") != "model_judge" {
		t.Fatalf("a goal that needs a model judge: %+v; want not met, not grounded, model_judge underivable", verdict)
	}
	var rec protocol.RecordedEvent
	if err := alice.Call(ctxT(t), protocol.MethodGoalsRecord, map[string]any{"goal": "tests pass", "condition": goal, "iteration": 4,
		"met": true, "grounded": false, "reason": "the judge said yes", "model": "small", "model_tier": "local"}, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.RunID != run.RunID {
		t.Fatalf("goals.record %+v, want it in run %s", rec, run.RunID)
	}
	if err := alice.Call(ctxT(t), protocol.MethodTurnsRecordCompleted, map[string]any{"decision": "accepted", "stop_reason": "max_turns", "was_truncated": true, "turns": 40}, nil); err != nil {
		t.Fatal(err)
	}
	if a := alertsOf(t, plain, 0); len(a.Alerts) != 1 || a.Alerts[0].Kind != "goal_ungrounded" {
		t.Fatalf("before the crash: %+v", a.Alerts)
	}
	alice.Close()
	plain.Close()
	d.kill(t)

	again := startDaemon(t, home)
	c := again.dial(t)
	defer c.Close()
	a := alertsOf(t, c, 0)
	if a.Summary.GoalEvaluations != 1 || a.Summary.GoalsMet != 1 || a.Summary.GoalsUngrounded != 1 {
		t.Fatalf("after a SIGKILL and a start the summary counts %d/%d/%d goals, want the one recorded",
			a.Summary.GoalEvaluations, a.Summary.GoalsMet, a.Summary.GoalsUngrounded)
	}
	if len(a.Alerts) != 1 || a.Alerts[0].Kind != "goal_ungrounded" || a.Alerts[0].Observed != 1 {
		t.Fatalf("after the restart, goal_ungrounded: %+v", a.Alerts)
	}
	var q protocol.EventsQueryResult
	if err := c.Call(ctxT(t), protocol.MethodEventsQuery, map[string]any{"kinds": []string{"turn_completed", "goal_evaluated"}}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Count != 2 {
		t.Fatalf("after the restart %d goal and turn events, want 2", q.Count)
	}
	for _, e := range q.Events {
		if e.Data["agent"] != "alice" || e.Data["run_id"] != run.RunID {
			t.Fatalf("%s after the restart: %v; want alice's run %s", e.Kind, e.Data, run.RunID)
		}
	}
	again.stop(t)
}

// TestTheScopeIsGovernedOnTheRealDaemon: an operator's require_claim rule
// lets a plain client's trusted claim through, holds an agent's own claim
// back, and an agent cannot submit as another caller.
func TestTheScopeIsGovernedOnTheRealDaemon(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "policies"), 0o700); err != nil {
		t.Fatal(err)
	}
	rule := "[[require_claim]]\nclaim = \"role\"\nequals = \"admin\"\ntool = \"read_report\"\n"
	if err := os.WriteFile(filepath.Join(home, "policies", "claims.toml"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	token := issueAgentToken(t, home, "alice")
	d := startDaemon(t, home)
	serve := func(c *client.Client) {
		c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) { return "the report", nil })
		if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "read_report"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(c *client.Client, scope map[string]any) (protocol.ProposalResult, error) {
		var res protocol.ProposalResult
		err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"scope": scope, "proposal": map[string]any{"actions": []any{
			map[string]any{"id": "r", "type": "tool_call", "tool": "read_report", "parameters": map[string]any{}},
		}}}, &res)
		return res, err
	}
	status := func(res protocol.ProposalResult, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Results[0].Status) + " " + res.Results[0].ErrorText()
	}
	admin := map[string]any{"callerId": "a2a:carol", "claims": map[string]any{"role": "admin"}}

	plain := d.dial(t)
	defer plain.Close()
	serve(plain)
	if got := status(submit(plain, admin)); !strings.HasPrefix(got, "succeeded") {
		t.Fatalf("a plain client's admin claim: %s", got)
	}
	if got := status(submit(plain, map[string]any{})); !strings.Contains(got, "require_claim:role") {
		t.Fatalf("no claim: %s", got)
	}

	alice := d.dialAgent(t, "alice", token)
	defer alice.Close()
	serve(alice)
	if got := status(submit(alice, map[string]any{"claims": map[string]any{"role": "admin"}})); !strings.Contains(got, "an agent's own claims do not count") {
		t.Fatalf("an agent's own admin claim: %s", got)
	}
	_, err := submit(alice, map[string]any{"callerId": "bob"})
	var rerr *jsonrpc2.Error
	if !errors.As(err, &rerr) || rerr.Code != protocol.CodeApprovalDenied || !strings.Contains(rerr.Message, "may not submit as callerId 'bob'") {
		t.Fatalf("an agent naming another caller: %v", err)
	}
	d.stop(t)
}
