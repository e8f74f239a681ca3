package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// Planning over candidates: proposal.score ranks them with no side
// effect; proposal.plan ranks them and runs the best valid one as
// proposal.submit would, falling back to the next-best when a run fails
// and aborts.

const (
	plannerShape = "planner?: {weights?: {success?, cost?, actions?}, window_days?}"
	scoreShape   = "{candidates: ActionProposal[], " + plannerShape + ", scope?: {tenantId?}}"
	planShape    = "{candidates: ActionProposal[], " + plannerShape + ", session_id?, scope?: {tenantId?}}"
)

// decodeCandidates decodes the candidates within max_plan_candidates and,
// all together, max_plan_actions, with ids minted; two candidates may not
// share an id. The bounds are checked as it goes, so a refused call has
// decoded at most one candidate past them.
func (c *conn) decodeCandidates(raw []protocol.Raw[protocol.ActionProposal]) ([]*protocol.ActionProposal, error) {
	maxCands, maxActions := c.srv.opts.MaxPlanCandidates, c.srv.opts.MaxPlanActions
	switch {
	case len(raw) == 0:
		return nil, invalidParams("candidates needs at least one ActionProposal")
	case len(raw) > maxCands:
		return nil, invalidParams("candidates has %d proposals; at most %d are scored at once (max_plan_candidates): send the likeliest %d", len(raw), maxCands, maxCands)
	}
	out := make([]*protocol.ActionProposal, len(raw))
	ids := make(map[string]int, len(raw))
	total := 0
	for i, r := range raw {
		prop, err := c.decodeProposal(r)
		if err != nil {
			return nil, invalidParams("candidates[%d]: %v", i, err)
		}
		if len(prop.FieldWarnings) > 0 && (prop.Strict || c.srv.opts.StrictFields) {
			return nil, invalidParams("candidates[%d]: %v", i, protocol.StrictFieldsError(prop.FieldWarnings))
		}
		if total += len(prop.Actions); total > maxActions {
			return nil, invalidParams("the candidates up to candidates[%d] have %d actions together; at most %d are scored at once (max_plan_actions): send fewer or smaller candidates", i, total, maxActions)
		}
		engine.Normalize(prop)
		if j, dup := ids[prop.ID]; dup {
			return nil, invalidParams("candidates[%d] has the id of candidates[%d] ('%s'): give each candidate its own id, or none", i, j, echoName(prop.ID))
		}
		ids[prop.ID] = i
		out[i] = prop
	}
	return out, nil
}

// scoreCandidates scores cands for this connection: its tools, the state
// of tenant, and the tool feedback it may see (an agent its own attempts).
func (c *conn) scoreCandidates(ctx context.Context, method string, cands []*protocol.ActionProposal, cfg *protocol.PlannerConfig, tenant string) ([]protocol.CandidateScore, []int, int, error) {
	if cfg == nil {
		cfg = &protocol.PlannerConfig{}
	}
	w, err := engine.ResolvePlanWeights(cfg.Weights)
	if err != nil {
		return nil, nil, 0, invalidParams("%v", err)
	}
	window, err := c.feedbackWindow("planner.window_days", cfg.WindowDays)
	if err != nil {
		return nil, nil, 0, err
	}
	obs, err := c.observedRates(ctx, method, "planner.window_days", &window, engine.PlanTools(cands))
	if err != nil {
		return nil, nil, 0, err
	}
	var feedback map[string]protocol.ToolFeedback
	if obs != nil {
		feedback = obs.Tools
	}
	scores, ranking, err := c.srv.rt.ScoreCandidates(ctx, cands, c.sess, tenant, w, feedback)
	var limit *engine.LimitError
	if errors.As(err, &limit) {
		return nil, nil, 0, invalidParams("%v", err)
	}
	if err != nil {
		return nil, nil, 0, storeError(method, "nothing was scored", err)
	}
	return scores, ranking, window, nil
}

func (c *conn) proposalScore(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.ScoreParams
	if err := decodeParams(params, &p, scoreShape); err != nil {
		return nil, err
	}
	tenant := scopeTenant(p.Scope)
	if err := c.mayUseTenant(protocol.MethodProposalScore, tenant); err != nil {
		return nil, err
	}
	cands, err := c.decodeCandidates(p.Candidates)
	if err != nil {
		return nil, err
	}
	scores, ranking, window, err := c.scoreCandidates(ctx, protocol.MethodProposalScore, cands, p.Planner, tenant)
	if err != nil {
		return nil, err
	}
	return protocol.ScoreResult{Scores: scores, Ranking: ranking, WindowDays: window}, nil
}

func (c *conn) proposalPlan(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.PlanParams
	if err := decodeParams(params, &p, planShape); err != nil {
		return nil, err
	}
	tenant := scopeTenant(p.Scope)
	if err := c.mayUseTenant(protocol.MethodProposalPlan, tenant); err != nil {
		return nil, err
	}
	cands, err := c.decodeCandidates(p.Candidates)
	if err != nil {
		return nil, err
	}
	scores, ranking, window, err := c.scoreCandidates(ctx, protocol.MethodProposalPlan, cands, p.Planner, tenant)
	if err != nil {
		return nil, err
	}
	if len(ranking) == 0 {
		e := invalidParams("no candidate is valid, so none was run: candidates[0]: %s; every candidate's issues are in this error's data (scores[].issues)", scores[0].Reasons[0])
		e.SetError(protocol.PlanInvalidData{Scores: scores})
		return nil, e
	}
	subs := make([]*engine.Submission, len(cands))
	for _, i := range ranking {
		subs[i] = c.submission(cands[i], p.SessionID, p.Scope)
	}
	// The fallback to the next-best candidate is the plan's recovery: a
	// candidate is not also replanned.
	res, chosen, attempts, err := c.srv.rt.Plan(ctx, subs, ranking, engine.Recovery{Timeout: c.attemptTimeout})
	if err != nil {
		var deadline *engine.DeadlineError
		if errors.As(err, &deadline) {
			return nil, executeError(protocol.MethodProposalPlan, err)
		}
		return nil, internalError("proposal.plan: %v", err)
	}
	res.Warnings = slices.Concat(cands[chosen].FieldWarnings, res.Warnings)
	return protocol.PlanResult{Result: res, Chosen: chosen, Scores: scores, Attempts: attempts, WindowDays: window}, nil
}
