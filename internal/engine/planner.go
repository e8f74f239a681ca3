package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Planning over candidates: each candidate proposal is verified and scored
// from what the daemon has seen of its tools (the trajectory store's
// success rates and p50 durations) and from its size; the best valid one
// runs through Execute, with every gate, and a run that fails and aborts
// (and so was rolled back) falls back to the next-best. Scoring reads each
// candidate once: its cost is linear in the candidates' size, plus one
// read of each state key a precondition or state dependency names.

// EventPlanFallback is appended when proposal.plan falls back from a
// candidate whose run failed to the next-best.
const EventPlanFallback EventKind = "plan_fallback"

// PlanWeights are the weights of a candidate's score, resolved.
type PlanWeights struct{ Success, Cost, Actions float64 }

// ResolvePlanWeights fills absent weights with their defaults and refuses
// a weight outside 0..1, or all of them 0.
func ResolvePlanWeights(w *protocol.PlanWeights) (PlanWeights, error) {
	out := PlanWeights{protocol.DefaultPlanWeightSuccess, protocol.DefaultPlanWeightCost, protocol.DefaultPlanWeightActions}
	if w == nil {
		return out, nil
	}
	for _, f := range []struct {
		name string
		in   *float64
		out  *float64
	}{{"success", w.Success, &out.Success}, {"cost", w.Cost, &out.Cost}, {"actions", w.Actions, &out.Actions}} {
		if f.in == nil {
			continue
		}
		if math.IsNaN(*f.in) || *f.in < 0 || *f.in > 1 {
			return out, fmt.Errorf("planner.weights.%s must be 0 to 1, got %g", f.name, *f.in)
		}
		*f.out = *f.in
	}
	if out.Success+out.Cost+out.Actions == 0 {
		return out, fmt.Errorf("planner.weights are all 0: give at least one weight above 0")
	}
	return out, nil
}

// PlanTools are the tools the candidates call, each once, in the order
// first called: what the scores need from the trajectory store.
func PlanTools(cands []*protocol.ActionProposal) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range cands {
		for i := range p.Actions {
			a := &p.Actions[i]
			if a.Type == protocol.ActionToolCall && !seen[a.Tool] {
				seen[a.Tool] = true
				out = append(out, a.Tool)
			}
		}
	}
	return out
}

// maxReasons bounds the tools a score's reasons name one by one.
const maxReasons = maxNamesInMessage

// ScoreCandidates scores every candidate (ids minted) against the session's
// tools and the state of tenant it may read, with feedback the tools'
// figures in the window (nil: the daemon keeps none). It returns the
// scores in the given order and the indexes of the valid candidates, best
// first, ties to the lower index.
func (rt *Runtime) ScoreCandidates(ctx context.Context, cands []*protocol.ActionProposal, s *Session, tenant string, w PlanWeights, feedback map[string]protocol.ToolFeedback) ([]protocol.CandidateScore, []int, error) {
	tools := s.Tools
	initial, err := rt.planState(ctx, cands, s.Capabilities(), tenant)
	if err != nil {
		return nil, nil, err
	}
	scores := make([]protocol.CandidateScore, len(cands))
	var ranking []int
	for i, p := range cands {
		scores[i] = scoreCandidate(i, p, rt.verifyCandidate(p, initial, tools), w, feedback)
		if scores[i].Valid {
			ranking = append(ranking, i)
		}
	}
	slices.SortStableFunc(ranking, func(a, b int) int {
		switch {
		case scores[a].Score > scores[b].Score:
			return -1
		case scores[a].Score < scores[b].Score:
			return 1
		}
		return 0
	})
	if ranking == nil {
		ranking = []int{}
	}
	return scores, ranking, nil
}

// verifyCandidate is verify's validity for one candidate: over max_actions,
// or an error-severity finding, makes it invalid.
func (rt *Runtime) verifyCandidate(p *protocol.ActionProposal, initial map[string]any, tools *ToolRegistry) []protocol.VerifyIssue {
	var errs []protocol.VerifyIssue
	if err := rt.CheckActions(p); err != nil {
		return []protocol.VerifyIssue{{Severity: "error", Message: err.Error(), Tier: TierDecision}}
	}
	for _, is := range verify(p, initial, tools, rt.opts.MaxActions, false).Issues {
		if is.Severity == "error" {
			errs = append(errs, is)
		}
	}
	return errs
}

// MaxPlanStateKeys bounds the distinct state keys one scoring reads (each
// is a read of the store, a round trip with PostgreSQL).
const MaxPlanStateKeys = 10_000

// planState reads the state keys the candidates' preconditions and state
// dependencies name, each once, from tenant's namespace. A key outside the
// session's capability set is not read (as absent): scoring tells no more
// of state than state.get would, and the capability gate refuses such a
// candidate when it runs.
func (rt *Runtime) planState(ctx context.Context, cands []*protocol.ActionProposal, caps *Capabilities, tenant string) (map[string]any, error) {
	state := map[string]any{}
	read := map[string]bool{}
	get := func(key string) error {
		if read[key] {
			return nil
		}
		if len(read) == MaxPlanStateKeys {
			return &LimitError{Msg: fmt.Sprintf("the candidates' preconditions and state_dependencies name more than %d distinct state keys, each a read of the store; at most %d are read for one scoring: send fewer candidates, or fewer keys", MaxPlanStateKeys, MaxPlanStateKeys)}
		}
		read[key] = true
		if caps.AllowsKey(key) != nil {
			return nil
		}
		v, ok, err := rt.State.Get(ctx, tenant, key)
		if err != nil {
			return store.Wrap("reading state for the candidates' preconditions", err)
		}
		if ok {
			state[key] = v
		}
		return nil
	}
	for _, p := range cands {
		for i := range p.Actions {
			a := &p.Actions[i]
			for _, pc := range a.Preconditions {
				if err := get(pc.Key); err != nil {
					return nil, err
				}
			}
			for _, k := range a.StateDependencies {
				if err := get(k); err != nil {
					return nil, err
				}
			}
		}
	}
	return state, nil
}

// scoreCandidate turns one candidate's verify errors and its tools' figures
// into its score and the reasons for it.
func scoreCandidate(index int, p *protocol.ActionProposal, errs []protocol.VerifyIssue, w PlanWeights, feedback map[string]protocol.ToolFeedback) protocol.CandidateScore {
	s := protocol.CandidateScore{Index: index, ProposalID: p.ID, Actions: len(p.Actions), Valid: len(errs) == 0, Reasons: []string{}}
	success, estimated := 1.0, 0.0
	// Per distinct tool: how often it is called, in the order first called.
	calls := map[string]int{}
	var order []string
	for i := range p.Actions {
		a := &p.Actions[i]
		if a.Type != protocol.ActionToolCall {
			continue
		}
		if calls[a.Tool] == 0 {
			order = append(order, a.Tool)
		}
		calls[a.Tool]++
	}
	var unseen []string
	for _, t := range order {
		rate, fb := defaultRate, feedback[t]
		if fb.Dispatched > 0 && fb.SuccessRate != nil {
			rate = *fb.SuccessRate
			if fb.P50Ms != nil {
				estimated += *fb.P50Ms * float64(calls[t])
			}
			if len(s.Reasons) < maxReasons {
				s.Reasons = append(s.Reasons, fmt.Sprintf("tool '%s' ×%d: success rate %.3f (%d of %d dispatched in the window), p50 %s", t, calls[t], rate, fb.Succeeded, fb.Dispatched, msText(fb.P50Ms)))
			}
		} else {
			unseen = append(unseen, t)
		}
		success *= math.Pow(rate, float64(calls[t]))
	}
	if len(unseen) > 0 {
		named := unseen[:min(len(unseen), maxReasons)]
		more := ""
		if len(unseen) > len(named) {
			more = fmt.Sprintf(" and %d more", len(unseen)-len(named))
		}
		s.Reasons = append(s.Reasons, fmt.Sprintf("no dispatched attempts in the window for %s%s: success rate %.1f each, duration not estimated", quoteNames(named), more, defaultRate))
	}
	s.ExpectedSuccess = round6(success)
	s.EstimatedMs = round6(estimated)
	if !s.Valid {
		s.Issues = errs
		first := errs[0].Message
		if errs[0].ActionID != "" {
			first = fmt.Sprintf("action '%s': %s", errs[0].ActionID, first)
		}
		s.Reasons = append([]string{fmt.Sprintf("invalid: verify found %d error(s), the first: %s; it is never run", len(errs), first)}, s.Reasons...)
		return s
	}
	cost := 1.0
	if estimated > protocol.PlanTargetDurationMs {
		cost = protocol.PlanTargetDurationMs / estimated
	}
	actions := 1.0
	if len(p.Actions) > protocol.PlanTargetActions {
		actions = float64(protocol.PlanTargetActions) / float64(len(p.Actions))
	}
	s.Score = round6((w.Success*success + w.Cost*cost + w.Actions*actions) / (w.Success + w.Cost + w.Actions))
	s.Reasons = append(s.Reasons, fmt.Sprintf("score %.6g = (%g × success %.6g + %g × cost %.6g + %g × actions %.6g) / %g; cost is 1 up to %g ms estimated, actions 1 up to %d actions",
		s.Score, w.Success, success, w.Cost, cost, w.Actions, actions, w.Success+w.Cost+w.Actions, protocol.PlanTargetDurationMs, protocol.PlanTargetActions))
	return s
}

func msText(ms *float64) string {
	if ms == nil {
		return "unknown"
	}
	return fmt.Sprintf("%g ms", *ms)
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// round6 keeps six decimals, so that scores compare and print stably.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Plan runs the candidates subs[order[0]], subs[order[1]], … through
// Execute (every validation and gate, as proposal.submit) until one does not
// fail: a run whose failed action aborted it (and rolled its state back)
// falls back to the next; a rejection, a success, the plan's cancellation
// (proposal.cancel with any candidate's id) or an exceeded budget stop it.
// It returns the last run's result and index, and every run. The error is
// Execute's (a deadline); the results are then not reported.
func (rt *Runtime) Plan(ctx context.Context, subs []*Submission, order []int, rec Recovery) (*protocol.ProposalResult, int, []protocol.PlanAttempt, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for _, i := range order {
		id := subs[i].Proposal.ID
		defer rt.running.untrack(id, rt.running.track(id, subs[i].Session.ID, cancel))
	}
	var (
		last     *protocol.ProposalResult
		chosen   = -1
		attempts []protocol.PlanAttempt
	)
	for n, i := range order {
		sub := subs[i]
		res, err := rt.Execute(ctx, sub, rec)
		if err != nil {
			return nil, i, attempts, err
		}
		last, chosen = res, i
		status, why := planOutcome(res, sub.Proposal)
		switch {
		case ctx.Err() != nil:
			status, why = protocol.PlanStopped, "the plan was stopped: "+context.Cause(ctx).Error()
		case status == protocol.PlanFailed && sub.Budget != nil && sub.Budget.Exceeded() != "":
			status, why = protocol.PlanStopped, why+"; no fallback: budget exceeded: "+sub.Budget.Exceeded()
		}
		attempts = append(attempts, protocol.PlanAttempt{Index: i, ProposalID: res.ProposalID, Status: status, Error: why})
		if status != protocol.PlanFailed {
			break
		}
		if n+1 < len(order) {
			next := order[n+1]
			rt.Events.Append(Event{Kind: EventPlanFallback, ProposalID: res.ProposalID, Connection: sub.Session.ID,
				Data: map[string]any{"from": i, "to": next, "next_proposal_id": subs[next].Proposal.ID}})
		}
	}
	return last, chosen, attempts, nil
}

// planOutcome classifies one run: a rejected action stops the plan, as the
// gates and policies decided; a failed action that aborted the run calls
// for the next candidate; anything else succeeded.
func planOutcome(res *protocol.ProposalResult, p *protocol.ActionProposal) (status, why string) {
	behavior := make(map[string]protocol.FailureBehavior, len(p.Actions))
	for i := range p.Actions {
		behavior[p.Actions[i].ID] = p.Actions[i].FailureBehavior
	}
	var failed string
	for _, ar := range res.Results {
		switch {
		case ar.Status == protocol.StatusRejected:
			return protocol.PlanRejected, fmt.Sprintf("action '%s' rejected: %s", ar.ActionID, ar.ErrorText())
		case ar.Status == protocol.StatusFailed && behavior[ar.ActionID] != protocol.FailSkip && failed == "":
			failed = fmt.Sprintf("action '%s' failed: %s", ar.ActionID, ar.ErrorText())
		}
	}
	if failed != "" {
		return protocol.PlanFailed, failed
	}
	return protocol.PlanSucceeded, ""
}
