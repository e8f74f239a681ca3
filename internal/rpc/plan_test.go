package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// planServer serves a runtime over a file trajectory store whose history
// says: "sure" always succeeded (20 of 20, 10 ms), "coin" half the time
// (10 of 20). The client's tools succeed, except "sure" called with
// {fail: true}; calls counts the calls of each tool.
type planServer struct {
	ts    *testServer
	c     *client.Client
	mu    sync.Mutex
	calls map[string]int
	// A call with {block: true} signals blocked and waits for release.
	blocked chan struct{}
	release chan struct{}
}

func newPlanServer(t *testing.T, opts Options) *planServer {
	t.Helper()
	traj, err := file.OpenTrajectories(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range 20 {
		for _, r := range []store.Trajectory{
			{Tool: "sure", Principal: "plain", Status: store.TrajectorySucceeded, DurationMs: 10, Attempt: 1, At: now},
			{Tool: "coin", Principal: "plain", Status: map[bool]string{true: store.TrajectorySucceeded, false: store.TrajectoryFailed}[i%2 == 0], DurationMs: 10, Attempt: 1, At: now},
		} {
			if err := traj.Append(ctxT(t), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	ps := &planServer{calls: map[string]int{}, blocked: make(chan struct{}, 1), release: make(chan struct{})}
	ps.ts = startServerWith(t, serverSetup{opts: opts, engine: engine.Options{Trajectories: traj}, closeAfter: traj.Close})
	ps.c = ps.ts.dial(t, opts.Token)
	t.Cleanup(func() { close(ps.release) })
	ps.c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		var p protocol.ToolExecuteParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		ps.mu.Lock()
		ps.calls[p.Tool]++
		ps.mu.Unlock()
		if p.Parameters["fail"] == true {
			return nil, errors.New("it broke")
		}
		if p.Parameters["block"] == true {
			ps.blocked <- struct{}{}
			<-ps.release
			return nil, errors.New("released")
		}
		return map[string]any{"ok": true}, nil
	})
	call(t, ps.c, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "sure"}, {Name: "coin"}, {Name: "deploy"}}, nil)
	return ps
}

func (ps *planServer) called(tool string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.calls[tool]
}

func candidate(id string, actions ...map[string]any) map[string]any {
	return map[string]any{"id": id, "actions": actions}
}

// TestProposalScoreRanksWithoutSideEffects: the candidate whose tool has
// always succeeded ranks above the one whose tool succeeds half the time;
// an invalid one is listed with its issues and left out of the ranking;
// nothing runs and no state is written.
func TestProposalScoreRanksWithoutSideEffects(t *testing.T) {
	ps := newPlanServer(t, Options{})
	var res protocol.ScoreResult
	call(t, ps.c, protocol.MethodProposalScore, map[string]any{"candidates": []any{
		candidate("by-coin", stateWrite("w", "k", 1), toolCall("c", "coin", nil)),
		candidate("by-sure", stateWrite("w", "k", 2), toolCall("s", "sure", nil)),
		candidate("broken", toolCall("x", "nosuchtool", nil)),
	}}, &res)
	if len(res.Scores) != 3 || len(res.Ranking) != 2 || res.Ranking[0] != 1 || res.Ranking[1] != 0 {
		t.Fatalf("ranking %v of %+v, want [1 0]", res.Ranking, res.Scores)
	}
	coin, sure, broken := res.Scores[0], res.Scores[1], res.Scores[2]
	if sure.ExpectedSuccess != 1 || coin.ExpectedSuccess != 0.5 || sure.EstimatedMs != 10 || sure.Score <= coin.Score {
		t.Errorf("sure %+v, coin %+v", sure, coin)
	}
	// success 1: (0.8×1 + 0.1×1 + 0.1×1) / 1; success 0.5: 0.8×0.5 + 0.2.
	if sure.Score != 1 || coin.Score != 0.6 {
		t.Errorf("scores %g and %g, want 1 and 0.6", sure.Score, coin.Score)
	}
	if broken.Valid || broken.Score != 0 || len(broken.Issues) == 0 || !strings.Contains(broken.Issues[0].Message, "unknown tool 'nosuchtool'") ||
		!strings.HasPrefix(broken.Reasons[0], "invalid:") {
		t.Errorf("broken %+v", broken)
	}
	if n := ps.called("sure") + ps.called("coin"); n != 0 {
		t.Errorf("scoring called tools %d times", n)
	}
	if _, ok := ps.ts.stateValue(t, "", "k"); ok {
		t.Error("scoring wrote state")
	}
	// Weights change the order: with only the action count weighed, the
	// two tie and the lower index comes first.
	call(t, ps.c, protocol.MethodProposalScore, map[string]any{"planner": map[string]any{"weights": map[string]any{"success": 0, "cost": 0, "actions": 1}},
		"candidates": []any{candidate("by-coin", toolCall("c", "coin", nil)), candidate("by-sure", toolCall("s", "sure", nil))}}, &res)
	if res.Ranking[0] != 0 || res.Scores[0].Score != res.Scores[1].Score {
		t.Errorf("actions only: ranking %v, scores %+v", res.Ranking, res.Scores)
	}
}

// TestProposalPlanFallsBackWhenTheBestFails: the best candidate's tool
// fails, its run aborts and its state write is rolled back, and the
// next-best runs and succeeds.
func TestProposalPlanFallsBackWhenTheBestFails(t *testing.T) {
	ps := newPlanServer(t, Options{})
	var res protocol.PlanResult
	call(t, ps.c, protocol.MethodProposalPlan, map[string]any{"candidates": []any{
		candidate("second", stateWrite("w", "fallback", true), toolCall("c", "coin", nil)),
		candidate("first", stateWrite("w", "best", true), map[string]any{"id": "s", "type": "tool_call", "tool": "sure", "parameters": map[string]any{"fail": true}, "dependencies": []string{"w"}}),
	}}, &res)
	if res.Chosen != 0 || len(res.Attempts) != 2 {
		t.Fatalf("chosen %d, attempts %+v", res.Chosen, res.Attempts)
	}
	if a := res.Attempts[0]; a.Index != 1 || a.ProposalID != "first" || a.Status != protocol.PlanFailed || !strings.Contains(a.Error, "it broke") {
		t.Errorf("first attempt %+v", a)
	}
	if a := res.Attempts[1]; a.Index != 0 || a.ProposalID != "second" || a.Status != protocol.PlanSucceeded {
		t.Errorf("second attempt %+v", a)
	}
	if res.Result == nil || res.Result.ProposalID != "second" {
		t.Fatalf("result %+v", res.Result)
	}
	for _, r := range res.Result.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Errorf("action %s: %s", r.ActionID, r.Status)
		}
	}
	if _, ok := ps.ts.stateValue(t, "", "best"); ok {
		t.Error("the failed candidate's state write was not rolled back")
	}
	if v, ok := ps.ts.stateValue(t, "", "fallback"); !ok || v != true {
		t.Errorf("fallback = %v, %v", v, ok)
	}
	evs := ps.ts.rt.Events.Query(engine.EventQuery{Kinds: []engine.EventKind{engine.EventPlanFallback}})
	if len(evs) != 1 || evs[0].ProposalID != "first" {
		t.Errorf("plan_fallback events: %+v", evs)
	}
}

// submitDirect is what proposal.submit answers for actions, with id.
func submitDirect(t *testing.T, c *client.Client, id string, actions ...map[string]any) *protocol.ProposalResult {
	t.Helper()
	var res protocol.ProposalResult
	call(t, c, protocol.MethodProposalSubmit, map[string]any{"proposal": candidate(id, actions...)}, &res)
	return &res
}

// sameOutcome fails unless two results rejected or ran the same actions
// with the same statuses and errors, the proposal ids aside.
func sameOutcome(t *testing.T, plan, submit *protocol.ProposalResult, planID, submitID string) {
	t.Helper()
	if len(plan.Results) != len(submit.Results) {
		t.Fatalf("plan %+v\nsubmit %+v", plan.Results, submit.Results)
	}
	for i := range plan.Results {
		p, s := plan.Results[i], submit.Results[i]
		pe := strings.ReplaceAll(p.ErrorText(), planID, "ID")
		se := strings.ReplaceAll(s.ErrorText(), submitID, "ID")
		if p.ActionID != s.ActionID || p.Status != s.Status || pe != se {
			t.Errorf("action %d: plan %s %s %q, submit %s %s %q", i, p.ActionID, p.Status, pe, s.ActionID, s.Status, se)
		}
	}
}

// TestProposalPlanBestCandidateMeetsEveryGate: a best candidate that a
// policy denies, or that needs a person's approval nobody is there to
// give, is rejected exactly as proposal.submit rejects the same proposal,
// and the plan stops there: the next-best candidate does not run.
func TestProposalPlanBestCandidateMeetsEveryGate(t *testing.T) {
	ps := newPlanServer(t, Options{})
	// Without trajectories for it, deploy's rate is 0.5, below sure's; the
	// weights make the smaller candidate the best.
	weights := map[string]any{"weights": map[string]any{"success": 0, "cost": 0, "actions": 1}}
	fallback := candidate("fallback", stateWrite("w", "fell_back", true), toolCall("c", "coin", nil))
	for i := 2; i <= 11; i++ { // 11 actions: below the best's score
		fallback["actions"] = append(fallback["actions"].([]map[string]any), stateWrite("w"+strings.Repeat("x", i), "fell_back", true))
	}

	t.Run("approval needed", func(t *testing.T) {
		var res protocol.PlanResult
		call(t, ps.c, protocol.MethodProposalPlan, map[string]any{"planner": weights, "candidates": []any{fallback, candidate("plan-ship-1", toolCall("d", "deploy", nil))}}, &res)
		if res.Chosen != 1 || len(res.Attempts) != 1 || res.Attempts[0].Status != protocol.PlanRejected {
			t.Fatalf("chosen %d, attempts %+v", res.Chosen, res.Attempts)
		}
		want := submitDirect(t, ps.c, "direct-ship-2", toolCall("d", "deploy", nil))
		if want.Results[0].Status != protocol.StatusRejected || !strings.Contains(want.Results[0].ErrorText(), "approv") {
			t.Fatalf("proposal.submit of deploy: %+v", want.Results)
		}
		sameOutcome(t, res.Result, want, "plan-ship-1", "direct-ship-2")
	})

	t.Run("policy denies", func(t *testing.T) {
		call(t, ps.c, protocol.MethodPolicyRegister, protocol.PolicyDefinition{Name: "no-sure", Rule: "deny_tool", Target: "sure"}, nil)
		defer call(t, ps.c, protocol.MethodPolicyUnregister, map[string]any{"name": "no-sure"}, nil)
		var res protocol.PlanResult
		call(t, ps.c, protocol.MethodProposalPlan, map[string]any{"planner": weights, "candidates": []any{fallback, candidate("plan-sure-1", toolCall("s", "sure", nil))}}, &res)
		if res.Chosen != 1 || len(res.Attempts) != 1 || res.Attempts[0].Status != protocol.PlanRejected {
			t.Fatalf("chosen %d, attempts %+v", res.Chosen, res.Attempts)
		}
		sameOutcome(t, res.Result, submitDirect(t, ps.c, "direct-sure-2", toolCall("s", "sure", nil)), "plan-sure-1", "direct-sure-2")
	})

	if n := ps.called("sure") + ps.called("coin") + ps.called("deploy"); n != 0 {
		t.Errorf("tools were called %d times", n)
	}
	if _, ok := ps.ts.stateValue(t, "", "fell_back"); ok {
		t.Error("the next-best candidate ran after a rejection")
	}
}

// TestProposalPlanRefusesWhenNoCandidateIsValid: the error names the first
// candidate's first issue, and its data has every candidate's issues.
func TestProposalPlanRefusesWhenNoCandidateIsValid(t *testing.T) {
	ps := newPlanServer(t, Options{})
	err := ps.c.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{
		candidate("a", toolCall("x", "nosuchtool", nil)),
		candidate("b", map[string]any{"id": "p", "type": "tool_call", "tool": "sure", "preconditions": []any{map[string]any{"key": "never", "operator": "exists"}}}),
	}}, nil)
	code, msg := rpcCode(t, err)
	if code != protocol.CodeInvalidParams || !strings.Contains(msg, "no candidate is valid") || !strings.Contains(msg, "unknown tool 'nosuchtool'") {
		t.Fatalf("%d %s", code, msg)
	}
	var rerr *jsonrpc2.Error
	errors.As(err, &rerr)
	var data protocol.PlanInvalidData
	if rerr.Data == nil || json.Unmarshal(*rerr.Data, &data) != nil || len(data.Scores) != 2 {
		t.Fatalf("data %v", rerr.Data)
	}
	if len(data.Scores[1].Issues) == 0 || !strings.Contains(data.Scores[1].Issues[0].Message, "impossible plan") {
		t.Errorf("second candidate's issues: %+v", data.Scores[1].Issues)
	}
	if n := ps.called("sure"); n != 0 {
		t.Errorf("sure was called %d times", n)
	}
}

// TestPlanBounds: max_plan_candidates and max_plan_actions admit a call at
// the bound and refuse one past it, for both methods, before anything is
// scored or run; so are the other bad inputs.
func TestPlanBounds(t *testing.T) {
	ps := newPlanServer(t, Options{MaxPlanCandidates: 2, MaxPlanActions: 3})
	two := []any{candidate("a", toolCall("s", "sure", nil)), candidate("b", toolCall("s", "sure", nil), toolCall("t", "sure", nil))}
	for _, m := range []string{protocol.MethodProposalScore, protocol.MethodProposalPlan} {
		if err := ps.c.Call(ctxT(t), m, map[string]any{"candidates": two}, nil); err != nil {
			t.Fatalf("%s at both bounds: %v", m, err)
		}
		for _, tc := range []struct {
			name   string
			params map[string]any
			want   string
		}{
			{"three candidates", map[string]any{"candidates": append(two[:2:2], candidate("c"))}, "candidates has 3 proposals; at most 2 are scored at once (max_plan_candidates)"},
			{"four actions", map[string]any{"candidates": []any{two[1], candidate("c", toolCall("s", "sure", nil), toolCall("t", "sure", nil))}}, "have 4 actions together; at most 3 are scored at once (max_plan_actions)"},
			{"none", map[string]any{"candidates": []any{}}, "candidates needs at least one ActionProposal"},
			{"same id", map[string]any{"candidates": []any{candidate("a", toolCall("s", "sure", nil)), candidate("a", toolCall("s", "sure", nil))}}, "candidates[1] has the id of candidates[0] ('a')"},
			{"weight", map[string]any{"candidates": two, "planner": map[string]any{"weights": map[string]any{"cost": 2}}}, "planner.weights.cost must be 0 to 1, got 2"},
			{"zero weights", map[string]any{"candidates": two, "planner": map[string]any{"weights": map[string]any{"success": 0, "cost": 0, "actions": 0}}}, "planner.weights are all 0"},
			{"window", map[string]any{"candidates": two, "planner": map[string]any{"window_days": 0}}, "planner.window_days must be 1 to 90"},
			{"not a proposal", map[string]any{"candidates": []any{"deploy everything"}}, "candidates[0]:"},
		} {
			err := ps.c.Call(ctxT(t), m, tc.params, nil)
			if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, tc.want) {
				t.Errorf("%s, %s: %d %s; want %q", m, tc.name, code, msg, tc.want)
			}
		}
	}
	if n := ps.called("sure"); n != 1 {
		t.Errorf("sure was called %d times; want once, by the one plan within the bounds", n)
	}
}

// TestProposalPlanStopsOnCancel: proposal.cancel with the running
// candidate's id stops the whole plan: the next-best does not run.
func TestProposalPlanStopsOnCancel(t *testing.T) {
	ps := newPlanServer(t, Options{})
	done, res := make(chan error, 1), &protocol.PlanResult{}
	go func() {
		done <- ps.c.Call(ctxT(t), protocol.MethodProposalPlan, map[string]any{"candidates": []any{
			candidate("plan-blocks", toolCall("s", "sure", map[string]any{"block": true})),
			candidate("plan-next", stateWrite("w", "next_ran", true)),
		}}, res)
	}()
	select {
	case <-ps.blocked:
	case <-ctxT(t).Done():
		t.Fatal("the best candidate's tool was never called")
	}
	var cancelled protocol.ProposalCancelResult
	call(t, ps.c, protocol.MethodProposalCancel, map[string]any{"proposal_id": "plan-blocks", "reason": "changed my mind"}, &cancelled)
	if !cancelled.Cancelled {
		t.Fatal("proposal.cancel did not find the running candidate")
	}
	select {
	case err := <-done:
		if err != nil || res.Chosen != 0 || len(res.Attempts) != 1 || res.Attempts[0].Status != protocol.PlanStopped || !strings.Contains(res.Attempts[0].Error, "changed my mind") {
			t.Fatalf("plan after the cancel: %v %+v", err, res)
		}
	case <-ctxT(t).Done():
		t.Fatal("the plan did not end after proposal.cancel")
	}
	if _, ok := ps.ts.stateValue(t, "", "next_ran"); ok {
		t.Error("the next-best candidate ran after the plan was cancelled")
	}
}

// TestProposalScoreReadsOnlyStateTheConnectionMay: a precondition on a key
// outside the connection's capability set is judged as if the key were
// absent, so scoring tells no more of state than state.get would.
func TestProposalScoreReadsOnlyStateTheConnectionMay(t *testing.T) {
	ps := newPlanServer(t, Options{})
	if err := ps.ts.rt.State.Set(ctxT(t), "", "secret", 1.0); err != nil {
		t.Fatal(err)
	}
	guarded := candidate("guarded", map[string]any{"id": "g", "type": "tool_call", "tool": "sure",
		"preconditions": []any{map[string]any{"key": "secret", "operator": "eq", "value": 1}}})
	valid := func() bool {
		var res protocol.ScoreResult
		call(t, ps.c, protocol.MethodProposalScore, map[string]any{"candidates": []any{guarded}}, &res)
		return res.Scores[0].Valid
	}
	if !valid() {
		t.Fatal("with the key readable, the precondition holds and the candidate is valid")
	}
	call(t, ps.c, protocol.MethodSessionCapabilitiesSet, map[string]any{"state_keys": []string{"public/*"}}, nil)
	if valid() {
		t.Error("with the key outside the capability set, scoring read it")
	}
}
