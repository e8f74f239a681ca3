package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/protocol"
)

// sp is a state_predicate condition.
func sp(key, op string, value any) map[string]any {
	return map[string]any{"type": "state_predicate", "key": key, "operator": op, "value": value}
}

func cond(typ string, kv ...any) map[string]any {
	c := map[string]any{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// evaluate calls goals.evaluate and returns its verdict.
func evaluate(t *testing.T, tb *toolbox, goal map[string]any, proposalID string) protocol.GoalsEvaluateResult {
	t.Helper()
	params := map[string]any{"goal": goal}
	if proposalID != "" {
		params["proposal_id"] = proposalID
	}
	var res protocol.GoalsEvaluateResult
	mustCall(t, tb, protocol.MethodGoalsEvaluate, params, &res)
	return res
}

// TestGoalsEvaluateDecidesFromGroundTruth: each decidable condition holds
// and fails on what the daemon itself recorded, a missing input fails,
// command and model_judge fail closed, and grounded says whether the
// verdict depends on them.
func TestGoalsEvaluateDecidesFromGroundTruth(t *testing.T) {
	ts := startServer(t, Options{})
	tools := integrityTools()
	tools["flaky"] = func(context.Context, protocol.ToolExecuteParams) (any, error) { return nil, errors.New("down") }
	tb := newToolbox(t, ts, tools)
	mustCall(t, tb, protocol.MethodStateSet, map[string]any{"key": "deploy", "value": "done"}, nil)
	ok := proposal(toolCall("s", "search", map[string]any{"q": "x"}), stateWrite("w", "report", "written"))
	ok["id"] = "p-ok"
	tb.submit(t, ok)
	bad := proposal(toolCall("s", "search", nil), toolCall("f", "flaky", nil))
	bad["id"] = "p-bad"
	tb.submit(t, bad)

	search3 := []map[string]any{{"tool": "search", "result_count": 3}}
	for _, c := range []struct {
		name            string
		goal            map[string]any
		proposal        string
		met, grounded   bool
		reason          string
		underivableKind string
	}{
		{"state holds", sp("deploy", "eq", "done"), "", true, true, "state 'deploy' eq \"done\" holds", ""},
		{"state fails", sp("deploy", "eq", "pending"), "", false, true, "does not hold", ""},
		{"a state write the plan made", sp("report", "exists", nil), "", true, true, "holds", ""},
		{"plan achieved", cond("plan_achieved"), "p-ok", true, true, "all 2 actions succeeded", ""},
		{"plan not achieved", cond("plan_achieved"), "p-bad", false, true, "1 of 2 actions succeeded ('f' failed)", ""},
		{"plan without a proposal", cond("plan_achieved"), "", false, true, "plan_achieved needs proposal_id", ""},
		{"plan of an unknown proposal", cond("plan_achieved"), "p-none", false, true, "no proposal_received event", ""},
		{"receipts grounded", cond("tool_receipts_grounded", "claims", search3), "p-ok", true, true, "1 claims grounded", ""},
		{"receipts misstated", cond("tool_receipts_grounded", "claims", []map[string]any{{"tool": "search", "result_count": 9}}), "p-ok", false, true, "misstated_result_count", ""},
		{"receipts fabricated", cond("tool_receipts_grounded", "claims", []map[string]any{{"tool": "send_email"}}), "p-ok", false, true, "fabricated_tool_reference", ""},
		{"receipts without a proposal", cond("tool_receipts_grounded", "claims", search3), "", false, true, "needs proposal_id", ""},
		{"receipts without claims", cond("tool_receipts_grounded"), "p-ok", false, true, "names no claims", ""},
		{"assumptions hold", cond("state_consistent", "assumptions", []map[string]any{{"key": "deploy", "expected_value": "done"}}), "", true, true, "1 assumptions hold", ""},
		{"assumptions diverge", cond("state_consistent", "assumptions", []map[string]any{{"key": "deploy", "expected_value": "pending"}}), "", false, true, "does not hold the expected value", ""},
		{"consistency without input", cond("state_consistent"), "", false, true, "needs assumptions, proposal_id, or both", ""},
		{"consistency with the check off", cond("state_consistent"), "p-ok", false, true, "transaction check off", ""},
		{"all of grounded", cond("all_of", "conditions", []any{sp("deploy", "eq", "done"), cond("plan_achieved"), cond("tool_receipts_grounded", "claims", search3)}), "p-ok", true, true, "all_of holds", ""},
		{"any of met by ground truth", cond("any_of", "conditions", []any{cond("model_judge", "prompt", "is it good?"), sp("deploy", "eq", "done")}), "", true, true, "any_of holds", "model_judge"},
		{"all of held up by a command", cond("all_of", "conditions", []any{sp("deploy", "eq", "done"), cond("command", "cmd", "make test")}), "", false, false, "command is underivable", "command"},
		{"all of failed by ground truth", cond("all_of", "conditions", []any{sp("deploy", "eq", "pending"), cond("model_judge")}), "", false, true, "all_of fails", "model_judge"},
		{"any of only judged", cond("any_of", "conditions", []any{cond("model_judge"), sp("deploy", "eq", "pending")}), "", false, false, "any_of fails", "model_judge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := evaluate(t, tb, c.goal, c.proposal)
			if res.Met != c.met || res.Grounded != c.grounded || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("got met %v grounded %v reason %q; want met %v grounded %v, a reason with %q", res.Met, res.Grounded, res.Reason, c.met, c.grounded, c.reason)
			}
			if got := strings.Join(res.Underivable, ","); got != c.underivableKind {
				t.Fatalf("underivable %v, want %q", res.Underivable, c.underivableKind)
			}
		})
	}

	// With the transaction check on, a proposal without conflicts is
	// consistent and one with a write-write race is not.
	mustCall(t, tb, protocol.MethodSessionTransactionCheckSet, map[string]any{"mode": "warn"}, nil)
	calm := proposal(stateWrite("a", "x", 1))
	calm["id"] = "p-calm"
	tb.submit(t, calm)
	race := proposal(stateWrite("a", "y", 1), stateWrite("b", "y", 2))
	race["id"] = "p-race"
	tb.submit(t, race)
	if res := evaluate(t, tb, cond("state_consistent"), "p-calm"); !res.Met || !strings.Contains(res.Reason, "passed the transaction check (warn)") {
		t.Fatalf("a calm proposal under warn: %+v", res)
	}
	if res := evaluate(t, tb, cond("state_consistent"), "p-race"); res.Met || !strings.Contains(res.Reason, "found 1 conflicts") {
		t.Fatalf("a racing proposal under warn: %+v", res)
	}
}

// TestGoalsEvaluateBounds: max_goal_conditions and the depth bound refuse
// at one past, and serve at the bound; a malformed condition says what is
// wrong.
func TestGoalsEvaluateBounds(t *testing.T) {
	ts := startServerWith(t, serverSetup{engine: engine.Options{MaxGoalConditions: 4, IntegrityOptions: engine.IntegrityOptions{MaxReceiptClaims: 2}}})
	tb := newToolbox(t, ts, integrityTools())
	leaves := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = sp("k", "not_exists", nil)
		}
		return out
	}
	if res := evaluate(t, tb, cond("all_of", "conditions", leaves(3)), ""); !res.Met {
		t.Fatalf("4 conditions (the bound): %+v", res)
	}
	refused := func(goal map[string]any, want string) {
		t.Helper()
		code, msg := rpcCode(t, tb.Call(ctxT(t), protocol.MethodGoalsEvaluate, map[string]any{"goal": goal}, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, want) {
			t.Fatalf("%v: %d %s; want -32602 with %q", goal, code, msg, want)
		}
	}
	refused(cond("all_of", "conditions", leaves(4)), "max_goal_conditions")
	refused(cond("tool_receipts_grounded", "claims", []map[string]any{{"tool": "a"}, {"tool": "b"}, {"tool": "c"}}), "max_receipt_claims")
	refused(cond("stat_predicate"), "unknown type 'stat_predicate'")
	refused(cond(""), "needs a 'type'")
	refused(cond("state_predicate"), "needs 'key'")
	refused(sp("k", "like", 1), "unknown operator 'like'")
	refused(cond("any_of"), "at least one condition")

	deep := func(levels int) map[string]any {
		g := sp("k", "not_exists", nil)
		for range levels - 1 {
			g = cond("any_of", "conditions", []any{g})
		}
		return g
	}
	wide := startServerWith(t, serverSetup{engine: engine.Options{MaxGoalConditions: 100}})
	wb := newToolbox(t, wide, integrityTools())
	if res := evaluate(t, wb, deep(protocol.MaxGoalDepth), ""); !res.Met {
		t.Fatalf("%d levels (the bound): %+v", protocol.MaxGoalDepth, res)
	}
	code, msg := rpcCode(t, wb.Call(ctxT(t), protocol.MethodGoalsEvaluate, map[string]any{"goal": deep(protocol.MaxGoalDepth + 1)}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "nest more than 16 levels") {
		t.Fatalf("one level past the depth bound: %d %s", code, msg)
	}
	code, msg = rpcCode(t, wb.Call(ctxT(t), protocol.MethodGoalsEvaluate, map[string]any{}, nil))
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "'goal' is required") {
		t.Fatalf("no goal: %d %s", code, msg)
	}
}

// TestGoalsAndTurnsAreRecordedForTheCallerAndItsRun: an agent's records
// name the agent and its run, whatever the params say; the summary counts
// goal verdicts; goal_ungrounded fires on an ungrounded met goal; the
// Prometheus counters move.
func TestGoalsAndTurnsAreRecordedForTheCallerAndItsRun(t *testing.T) {
	rs := startRunsServer(t, runsSetup{})
	alice := rs.mustAgent(t, "alice")
	var run protocol.RunsStartResult
	call(t, alice, protocol.MethodRunsStart, map[string]any{"intent": "ship it"}, &run)

	ungroundedBefore := testutil.ToFloat64(metrics.GoalsEvaluated.WithLabelValues("met_ungrounded"))
	truncatedBefore := testutil.ToFloat64(metrics.TurnsCompleted.WithLabelValues("true"))

	record := map[string]any{"goal": "tests pass", "condition": cond("command", "cmd", "make test"), "iteration": 2, "met": true, "grounded": false,
		"reason": "the model said so", "model": "local-7b", "model_tier": "local", "agent": "bob"}
	var rec protocol.RecordedEvent
	call(t, alice, protocol.MethodGoalsRecord, record, &rec)
	if rec.Kind != string(engine.EventGoalEvaluated) || rec.RunID != run.RunID || rec.Seq == 0 {
		t.Fatalf("goals.record: %+v, want goal_evaluated in run %s", rec, run.RunID)
	}
	ev := eventOf(t, alice, map[string]any{"kinds": []string{string(engine.EventGoalEvaluated)}})
	if ev.Data["agent"] != "alice" || ev.Data["principal"] != protocol.PrincipalAgent || ev.Data["run_id"] != run.RunID || ev.Data["met"] != true || ev.Data["grounded"] != false || ev.Data["model_tier"] != "local" {
		t.Fatalf("goal_evaluated data %v: it must name alice (not the params' bob) and her run", ev.Data)
	}
	if c, _ := ev.Data["condition"].(map[string]any); c["type"] != "command" || c["cmd"] != "make test" {
		t.Fatalf("the condition is kept as sent, its command included: %v", ev.Data["condition"])
	}
	call(t, alice, protocol.MethodGoalsRecord, map[string]any{"goal": "tests pass", "condition": sp("ci", "eq", "green"), "iteration": 3, "met": true, "grounded": true, "reason": "ci is green"}, nil)
	call(t, alice, protocol.MethodGoalsRecord, map[string]any{"goal": "tests pass", "condition": sp("ci", "eq", "green"), "iteration": 1, "met": false, "grounded": true, "reason": "red"}, nil)

	call(t, alice, protocol.MethodTurnsRecordCompleted, map[string]any{"decision": "accepted", "stop_reason": "max_tokens", "was_truncated": true, "turns": 12, "model": "local-7b"}, &rec)
	if rec.Kind != string(engine.EventTurnCompleted) || rec.RunID != run.RunID {
		t.Fatalf("turns.record_completed: %+v", rec)
	}
	ev = eventOf(t, alice, map[string]any{"kinds": []string{string(engine.EventTurnCompleted)}})
	if ev.Data["agent"] != "alice" || ev.Data["run_id"] != run.RunID || ev.Data["was_truncated"] != true || ev.Data["decision"] != "accepted" {
		t.Fatalf("turn_completed data %v", ev.Data)
	}

	var sum protocol.MetricsSummary
	call(t, alice, protocol.MethodMetricsSummary, nil, &sum)
	if sum.GoalEvaluations != 3 || sum.GoalsMet != 2 || sum.GoalsUngrounded != 1 {
		t.Fatalf("summary goals %d/%d/%d, want 3 evaluations, 2 met, 1 ungrounded", sum.GoalEvaluations, sum.GoalsMet, sum.GoalsUngrounded)
	}
	var alerts protocol.MetricsAlertsResult
	call(t, alice, protocol.MethodMetricsAlerts, map[string]any{"max_goals_ungrounded": 0}, &alerts)
	if len(alerts.Alerts) != 1 || alerts.Alerts[0].Kind != "goal_ungrounded" || alerts.Alerts[0].Observed != 1 {
		t.Fatalf("max_goals_ungrounded 0 with one ungrounded goal: %+v", alerts.Alerts)
	}
	call(t, alice, protocol.MethodMetricsAlerts, map[string]any{"max_goals_ungrounded": 1}, &alerts)
	if len(alerts.Alerts) != 0 {
		t.Fatalf("max_goals_ungrounded 1 with one: %+v", alerts.Alerts)
	}
	if d := testutil.ToFloat64(metrics.GoalsEvaluated.WithLabelValues("met_ungrounded")) - ungroundedBefore; d != 1 {
		t.Fatalf("car_goals_evaluated_total{outcome=met_ungrounded} moved by %v, want 1", d)
	}
	if d := testutil.ToFloat64(metrics.TurnsCompleted.WithLabelValues("true")) - truncatedBefore; d != 1 {
		t.Fatalf("car_turns_completed_total{truncated=true} moved by %v, want 1", d)
	}

	// Without a run the record names no run; a plain client is "plain".
	plain := rs.dial(t, "")
	rec = protocol.RecordedEvent{}
	call(t, plain, protocol.MethodTurnsRecordCompleted, map[string]any{"decision": "no_tool_calls", "was_truncated": false, "turns": 1}, &rec)
	if rec.RunID != "" {
		t.Fatalf("a connection without a run: %+v", rec)
	}
	ev = eventOf(t, plain, map[string]any{"kinds": []string{string(engine.EventTurnCompleted)}, "data_matches": map[string]any{"principal": "plain"}})
	if _, has := ev.Data["run_id"]; has || ev.Data["agent"] != nil {
		t.Fatalf("a plain client's record %v", ev.Data)
	}
}

// TestGoalRecordBounds: every input is bounded; one past is refused with
// nothing recorded, the bound itself is served.
func TestGoalRecordBounds(t *testing.T) {
	ts := startServerWith(t, serverSetup{opts: Options{MaxGoalTextBytes: 64}, engine: engine.Options{MaxGoalConditions: 2}})
	c := ts.dial(t, "")
	good := func() map[string]any {
		return map[string]any{"goal": strings.Repeat("g", 64), "condition": cond("plan_achieved"), "iteration": int64(protocol.MaxGoalCounter), "met": false, "grounded": true, "reason": "r"}
	}
	call(t, c, protocol.MethodGoalsRecord, good(), nil)
	call(t, c, protocol.MethodTurnsRecordCompleted, map[string]any{"decision": strings.Repeat("d", 64), "was_truncated": false, "turns": int64(protocol.MaxGoalCounter)}, nil)
	var before int
	call(t, c, protocol.MethodEventsCount, nil, &before)
	for _, bad := range []struct {
		name   string
		method string
		edit   func(p map[string]any)
		want   string
	}{
		{"goal text", protocol.MethodGoalsRecord, func(p map[string]any) { p["goal"] = strings.Repeat("g", 65) }, "max_goal_text_bytes"},
		{"reason", protocol.MethodGoalsRecord, func(p map[string]any) { p["reason"] = strings.Repeat("r", 65) }, "max_goal_text_bytes"},
		{"model tier", protocol.MethodGoalsRecord, func(p map[string]any) { p["model_tier"] = strings.Repeat("t", 65) }, "max_goal_text_bytes"},
		{"iteration too large", protocol.MethodGoalsRecord, func(p map[string]any) { p["iteration"] = int64(protocol.MaxGoalCounter) + 1 }, "'iteration' must be 0 to 4294967295"},
		{"iteration negative", protocol.MethodGoalsRecord, func(p map[string]any) { p["iteration"] = -1 }, "'iteration' must be 0"},
		{"no met", protocol.MethodGoalsRecord, func(p map[string]any) { delete(p, "met") }, "'iteration', 'met' and 'grounded' are required"},
		{"no goal", protocol.MethodGoalsRecord, func(p map[string]any) { delete(p, "goal") }, "'goal' is required"},
		{"no condition", protocol.MethodGoalsRecord, func(p map[string]any) { delete(p, "condition") }, "'condition' is required"},
		{"condition too large", protocol.MethodGoalsRecord, func(p map[string]any) {
			p["condition"] = cond("all_of", "conditions", []any{sp("a", "eq", 1), sp("b", "eq", 1)})
		}, "max_goal_conditions"},
		{"condition too long as JSON", protocol.MethodGoalsRecord, func(p map[string]any) {
			p["condition"] = cond("command", "cmd", strings.Repeat("x", 64))
		}, "'condition (as JSON)' is"},
		{"decision text", protocol.MethodTurnsRecordCompleted, func(p map[string]any) {
			clear(p)
			p["decision"], p["was_truncated"], p["turns"] = strings.Repeat("d", 65), false, 1
		}, "max_goal_text_bytes"},
		{"turns too large", protocol.MethodTurnsRecordCompleted, func(p map[string]any) {
			clear(p)
			p["decision"], p["was_truncated"], p["turns"] = "d", false, int64(protocol.MaxGoalCounter)+1
		}, "'turns' must be 0 to"},
		{"no was_truncated", protocol.MethodTurnsRecordCompleted, func(p map[string]any) {
			clear(p)
			p["decision"], p["turns"] = "d", 1
		}, "'was_truncated' and 'turns' are required"},
		{"a misspelt member", protocol.MethodTurnsRecordCompleted, func(p map[string]any) {
			clear(p)
			p["decision"], p["was_truncated"], p["turns"], p["truncated"] = "d", false, 1, true
		}, "truncated"},
	} {
		p := good()
		bad.edit(p)
		code, msg := rpcCode(t, c.Call(ctxT(t), bad.method, p, nil))
		if code != protocol.CodeInvalidParams || !strings.Contains(msg, bad.want) {
			t.Errorf("%s: %d %s; want -32602 with %q", bad.name, code, msg, bad.want)
		}
	}
	var after int
	call(t, c, protocol.MethodEventsCount, nil, &after)
	if after != before {
		t.Fatalf("refused records appended %d events", after-before)
	}
}
