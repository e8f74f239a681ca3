package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/file"
	"github.com/parslee-ai/car-server/protocol"
)

// feedbackServer serves a runtime over a file trajectory store, with a
// client whose tool "steady" always succeeds and "flaky" always fails.
func feedbackServer(t *testing.T, opts Options) (*testServer, *file.Trajectories, *client.Client) {
	t.Helper()
	traj, err := file.OpenTrajectories(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, serverSetup{opts: opts, engine: engine.Options{Trajectories: traj}, closeAfter: traj.Close})
	c := ts.dial(t, opts.Token)
	c.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		var p protocol.ToolExecuteParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if p.Tool == "flaky" {
			return nil, errors.New("flaky failed")
		}
		return map[string]any{"ok": true}, nil
	})
	call(t, c, protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "steady"}, {Name: "flaky"}}, nil)
	return ts, traj, c
}

// TestToolsFeedbackCountsDispatchedAttempts: every dispatched attempt is
// one record (a retry too), a rejected action none; tools.feedback counts
// them in its window, says null for a tool with nothing in it, and
// verify.monte_carlo takes the observed rates with their source.
func TestToolsFeedbackCountsDispatchedAttempts(t *testing.T) {
	_, traj, c := feedbackServer(t, Options{TrajectoryRetentionDays: 60, MaxFeedbackTools: 3})
	submit := func(want protocol.ActionStatus, actions ...any) {
		t.Helper()
		var res protocol.ProposalResult
		call(t, c, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions}}, &res)
		for _, r := range res.Results {
			if r.Status != want {
				t.Fatalf("action %s: %s, want %s", r.ActionID, r.Status, want)
			}
		}
	}
	submit(protocol.StatusSucceeded,
		map[string]any{"id": "s1", "type": "tool_call", "tool": "steady"},
		map[string]any{"id": "s2", "type": "tool_call", "tool": "steady"},
		map[string]any{"id": "s3", "type": "tool_call", "tool": "steady"})
	submit(protocol.StatusFailed, map[string]any{"id": "f", "type": "tool_call", "tool": "flaky", "failure_behavior": "retry", "max_retries": 1})
	submit(protocol.StatusRejected, map[string]any{"id": "never", "type": "tool_call", "tool": "unregistered"})
	// A record 40 days old: outside the default 30-day window.
	if err := traj.Append(ctxT(t), store.Trajectory{Tool: "steady", Principal: "plain", Status: store.TrajectoryFailed, DurationMs: 1, Attempt: 1, At: time.Now().UTC().AddDate(0, 0, -40)}); err != nil {
		t.Fatal(err)
	}

	var fb protocol.ToolsFeedbackResult
	call(t, c, protocol.MethodToolsFeedback, nil, &fb)
	got := map[string]protocol.ToolFeedback{}
	for _, f := range fb.Tools {
		got[f.Tool] = f
	}
	if fb.WindowDays != 30 || len(fb.Tools) != 2 {
		t.Fatalf("feedback: %+v", fb)
	}
	if s := got["steady"]; s.Dispatched != 3 || s.Succeeded != 3 || s.Failed != 0 || s.SuccessRate == nil || *s.SuccessRate != 1 || s.P50Ms == nil || s.P99Ms == nil || *s.P99Ms < *s.P50Ms {
		t.Errorf("steady: %+v", s)
	}
	if f := got["flaky"]; f.Dispatched != 2 || f.Succeeded != 0 || f.Failed != 2 || f.SuccessRate == nil || *f.SuccessRate != 0 {
		t.Errorf("flaky (two attempts, both failed): %+v", f)
	}

	call(t, c, protocol.MethodToolsFeedback, map[string]any{"window_days": 45, "tools": []string{"steady", "unregistered"}}, &fb)
	if len(fb.Tools) != 2 || fb.Tools[0].Tool != "steady" || fb.Tools[0].Dispatched != 4 || *fb.Tools[0].SuccessRate != 0.75 {
		t.Fatalf("45 days, steady: %+v", fb.Tools)
	}
	if u := fb.Tools[1]; u.Tool != "unregistered" || u.Dispatched != 0 || u.SuccessRate != nil || u.P50Ms != nil {
		t.Fatalf("a tool never dispatched (its action was rejected) must have a null rate: %+v", u)
	}

	for _, bad := range []map[string]any{{"window_days": 0}, {"window_days": 61}, {"tools": []string{"a", "b", "c", "d"}}, {"tools": []string{""}}} {
		code, msg := rpcCode(t, c.Call(ctxT(t), protocol.MethodToolsFeedback, bad, nil))
		if code != protocol.CodeInvalidParams {
			t.Errorf("tools.feedback %v: %d %q, want -32602", bad, code, msg)
		}
	}

	var mc protocol.MonteCarloResult
	call(t, c, protocol.MethodVerifyMonteCarlo, map[string]any{
		"proposal":           map[string]any{"actions": []any{map[string]any{"id": "a", "type": "tool_call", "tool": "steady"}, map[string]any{"id": "b", "type": "tool_call", "tool": "flaky"}, map[string]any{"id": "c", "type": "tool_call", "tool": "unregistered"}}},
		"tool_success_rates": map[string]float64{"flaky": 0.9},
	}, &mc)
	prov := mc.RateProvenance
	if !prov.TrajectoriesAvailable || prov.WindowDays != 30 || len(prov.Tools) != 3 {
		t.Fatalf("rate provenance: %+v", prov)
	}
	want := map[string]string{"steady": "trajectories", "flaky": "caller", "unregistered": "default"}
	for _, r := range prov.Tools {
		if r.Source != want[r.Tool] {
			t.Errorf("%s: source %q, want %q", r.Tool, r.Source, want[r.Tool])
		}
	}
	if r := prov.Tools[1]; r.Tool != "steady" || r.Rate != 1 || r.Dispatched == nil || *r.Dispatched != 3 || r.Succeeded == nil || *r.Succeeded != 3 {
		t.Errorf("steady's observed rate: %+v", r)
	}
	code, _ := rpcCode(t, c.Call(ctxT(t), protocol.MethodVerifyMonteCarlo, map[string]any{"proposal": map[string]any{"actions": []any{}}, "rate_window_days": 61}, nil))
	if code != protocol.CodeInvalidParams {
		t.Errorf("rate_window_days past retention: %d", code)
	}
}

// TestToolsFeedbackWithoutAStoreSaysSo: a daemon without trajectories
// answers an error that says so, and Monte Carlo says none are available.
func TestToolsFeedbackWithoutAStoreSaysSo(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	code, msg := rpcCode(t, c.Call(ctxT(t), protocol.MethodToolsFeedback, nil, nil))
	if code != protocol.CodeInternal || msg != "tools.feedback: this daemon keeps no trajectory store" {
		t.Fatalf("%d %q", code, msg)
	}
	var mc protocol.MonteCarloResult
	call(t, c, protocol.MethodVerifyMonteCarlo, map[string]any{"proposal": map[string]any{"actions": []any{map[string]any{"id": "a", "type": "tool_call", "tool": "x"}}}}, &mc)
	if mc.RateProvenance.TrajectoriesAvailable || mc.RateProvenance.Tools[0].Source != "default" {
		t.Fatalf("%+v", mc.RateProvenance)
	}
}

// TestAnAgentSeesItsOwnFeedback: an agent's tools.feedback counts its own
// attempts only; a plain client's counts every principal's.
func TestAnAgentSeesItsOwnFeedback(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "agent-tokens.json")
	if err := file.IssueToken(ctxT(t), tokens, "alice", "alice-token"); err != nil {
		t.Fatal(err)
	}
	ts, traj, plain := feedbackServer(t, Options{Token: testToken, AgentTokens: file.TokenFile(tokens)})
	now := time.Now().UTC()
	for _, r := range []store.Trajectory{
		{Tool: "secret-tool", Principal: "plain", Status: store.TrajectorySucceeded, DurationMs: 1, Attempt: 1, At: now},
		{Tool: "shared", Principal: "agent:bob", Status: store.TrajectoryFailed, DurationMs: 1, Attempt: 1, At: now},
		{Tool: "shared", Principal: "agent:alice", Status: store.TrajectorySucceeded, DurationMs: 1, Attempt: 1, At: now},
	} {
		if err := traj.Append(ctxT(t), r); err != nil {
			t.Fatal(err)
		}
	}
	alice, err := client.Dial(ctxT(t), ts.url, &client.Options{Token: "alice-token", AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alice.Close() })
	var fb protocol.ToolsFeedbackResult
	call(t, alice, protocol.MethodToolsFeedback, nil, &fb)
	if len(fb.Tools) != 1 || fb.Tools[0].Tool != "shared" || fb.Tools[0].Dispatched != 1 || *fb.Tools[0].SuccessRate != 1 {
		t.Fatalf("alice sees %+v; want her own attempt at shared alone", fb.Tools)
	}
	call(t, plain, protocol.MethodToolsFeedback, nil, &fb)
	if len(fb.Tools) != 2 || fb.Tools[1].Tool != "shared" || fb.Tools[1].Dispatched != 2 {
		t.Fatalf("the plain client sees %+v; want every principal's", fb.Tools)
	}
}
