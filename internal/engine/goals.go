package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Goals: a goal condition decided from what the daemon itself holds (state
// now, the event log's receipts and proposal outcomes, the transaction
// check's record), never from what a caller says happened. A check whose
// input is missing (no proposal named, no claim given, the proposal's
// events gone from the log) fails and says why; command and model_judge,
// which need a program or a model the daemon does not run, fail closed and
// are named as underivable.

// Events of goals and turns, appended by goals.record and
// turns.record_completed.
const (
	EventGoalEvaluated EventKind = "goal_evaluated"
	EventTurnCompleted EventKind = "turn_completed"
)

// DefaultMaxGoalConditions bounds the conditions (every node, all_of and
// any_of included) of one goal condition.
const DefaultMaxGoalConditions = 64

// goalOperators are the state_predicate operators (checkPrecondition's).
var goalOperators = []string{"eq", "neq", "gt", "lt", "gte", "lte", "exists", "not_exists", "contains"}

// goalTypes are the condition types, for the error that names them.
var goalTypes = []string{protocol.GoalStatePredicate, protocol.GoalAllOf, protocol.GoalAnyOf, protocol.GoalToolReceiptsGrounded,
	protocol.GoalPlanAchieved, protocol.GoalStateConsistent, protocol.GoalCommand, protocol.GoalModelJudge}

// goalSize is what one condition asks of the daemon.
type goalSize struct {
	nodes, claims, assumptions int
	needsEvents                bool // plan_achieved or state_consistent: the proposal's events are read
}

// CheckGoal checks a goal condition's shape and its bounds: at most
// max_goal_conditions nodes, protocol.MaxGoalDepth levels, max_receipt_claims
// claims and max_assumptions assumptions in all. A bound crossed is a
// *LimitError.
func (rt *Runtime) CheckGoal(g *protocol.GoalCondition) error {
	_, err := rt.checkGoal(g)
	return err
}

func (rt *Runtime) checkGoal(g *protocol.GoalCondition) (goalSize, error) {
	var sz goalSize
	if g == nil {
		return sz, errors.New("goal: give a GoalCondition ({type, ...})")
	}
	if err := walkGoal(g, "goal", 1, &sz); err != nil {
		return sz, err
	}
	if sz.nodes > rt.opts.MaxGoalConditions {
		return sz, &LimitError{Msg: fmt.Sprintf("goal: %d conditions; at most %d are decided at once (max_goal_conditions): split the goal", sz.nodes, rt.opts.MaxGoalConditions)}
	}
	if sz.claims > rt.opts.MaxReceiptClaims {
		return sz, &LimitError{Msg: fmt.Sprintf("goal: %d claims in all; at most %d are checked at once (max_receipt_claims): split the goal", sz.claims, rt.opts.MaxReceiptClaims)}
	}
	if sz.assumptions > rt.opts.MaxAssumptions {
		return sz, &LimitError{Msg: fmt.Sprintf("goal: %d assumptions in all; at most %d are checked at once (max_assumptions): split the goal", sz.assumptions, rt.opts.MaxAssumptions)}
	}
	return sz, nil
}

// walkGoal checks one node at path and counts it into sz. It stops at the
// depth bound, so a deep condition costs no more than the bound.
func walkGoal(g *protocol.GoalCondition, path string, depth int, sz *goalSize) error {
	if depth > protocol.MaxGoalDepth {
		return &LimitError{Msg: fmt.Sprintf("%s: all_of and any_of nest more than %d levels deep: flatten the goal", path, protocol.MaxGoalDepth)}
	}
	sz.nodes++
	if sz.nodes > maxGoalWalk {
		return &LimitError{Msg: fmt.Sprintf("goal: more than %d conditions: split the goal", maxGoalWalk)}
	}
	switch g.Type {
	case protocol.GoalStatePredicate:
		if g.Key == "" {
			return fmt.Errorf("%s: state_predicate needs 'key', the state key it compares", path)
		}
		if g.Operator != "" && !slices.Contains(goalOperators, g.Operator) {
			return fmt.Errorf("%s: unknown operator '%s' (use %s)", path, g.Operator, strings.Join(goalOperators, ", "))
		}
	case protocol.GoalAllOf, protocol.GoalAnyOf:
		if len(g.Conditions) == 0 {
			return fmt.Errorf("%s: %s needs at least one condition in 'conditions'", path, g.Type)
		}
		for i := range g.Conditions {
			if err := walkGoal(&g.Conditions[i], fmt.Sprintf("%s.conditions[%d]", path, i), depth+1, sz); err != nil {
				return err
			}
		}
	case protocol.GoalToolReceiptsGrounded:
		for i, c := range g.Claims {
			if c.Tool == "" {
				return fmt.Errorf("%s.claims[%d].tool: name the tool the claim is about", path, i)
			}
			if c.ResultCount != nil && *c.ResultCount < 0 {
				return fmt.Errorf("%s.claims[%d].result_count: must not be negative", path, i)
			}
		}
		sz.claims += len(g.Claims)
	case protocol.GoalStateConsistent:
		for i, a := range g.Assumptions {
			if a.Key == "" {
				return fmt.Errorf("%s.assumptions[%d]: an assumption needs 'key'", path, i)
			}
		}
		sz.assumptions += len(g.Assumptions)
		sz.needsEvents = true
	case protocol.GoalPlanAchieved:
		sz.needsEvents = true
	case protocol.GoalCommand, protocol.GoalModelJudge:
	case "":
		return fmt.Errorf("%s: needs a 'type' (%s)", path, strings.Join(goalTypes, ", "))
	default:
		return fmt.Errorf("%s: unknown type '%s' (use %s)", path, g.Type, strings.Join(goalTypes, ", "))
	}
	return nil
}

// maxGoalWalk stops walking a condition far larger than any setting admits,
// before it is counted to the end.
const maxGoalWalk = 100_000

// GoalInput is what a goal is decided against: the proposal the conditions
// that need one read ("" for none), the tenant of the state reads, and the
// connection asking (for the receipts check's event).
type GoalInput struct {
	ProposalID string
	Tenant     string
	Connection string
}

// verdict is one node's outcome: grounded when it does not depend on an
// underivable condition.
type verdict struct {
	met, grounded bool
	reason        string
}

// goalEval holds what one evaluation read, each at most once.
type goalEval struct {
	rt          *Runtime
	in          GoalInput
	receipts    map[*protocol.GoalCondition][]protocol.ClaimVerdict
	attempt     *proposalAttempt // the proposal's latest attempt, nil when not in the log
	underivable map[string]bool
}

// EvaluateGoal decides g against the daemon's ground truth. An error is a
// condition that is malformed or over a bound (a *LimitError), or ground
// truth that could not be read (the store, the event log).
func (rt *Runtime) EvaluateGoal(ctx context.Context, g *protocol.GoalCondition, in GoalInput) (protocol.GoalsEvaluateResult, error) {
	sz, err := rt.checkGoal(g)
	if err != nil {
		return protocol.GoalsEvaluateResult{}, err
	}
	ev := &goalEval{rt: rt, in: in, underivable: map[string]bool{}}
	if in.ProposalID != "" && sz.claims > 0 {
		if err := ev.readReceipts(ctx, g); err != nil {
			return protocol.GoalsEvaluateResult{}, err
		}
	}
	if in.ProposalID != "" && sz.needsEvents {
		if ev.attempt, err = rt.latestAttempt(ctx, in.ProposalID); err != nil {
			return protocol.GoalsEvaluateResult{}, err
		}
	}
	v, err := ev.decide(ctx, g)
	if err != nil {
		return protocol.GoalsEvaluateResult{}, err
	}
	res := protocol.GoalsEvaluateResult{Met: v.met, Grounded: v.grounded, Reason: v.reason}
	for k := range ev.underivable {
		res.Underivable = append(res.Underivable, k)
	}
	slices.Sort(res.Underivable)
	return res, nil
}

// readReceipts judges every claim of every tool_receipts_grounded node in
// one receipts check, and hands each node its verdicts.
func (ev *goalEval) readReceipts(ctx context.Context, g *protocol.GoalCondition) error {
	var nodes []*protocol.GoalCondition
	var claims []protocol.ClaimVerdict
	var all []protocol.ToolClaim
	var collect func(*protocol.GoalCondition)
	collect = func(n *protocol.GoalCondition) {
		if n.Type == protocol.GoalToolReceiptsGrounded && len(n.Claims) > 0 {
			nodes = append(nodes, n)
			all = append(all, n.Claims...)
		}
		for i := range n.Conditions {
			collect(&n.Conditions[i])
		}
	}
	collect(g)
	rep, err := ev.rt.VerifyReceipts(ctx, all, ev.in.ProposalID, ev.in.Connection)
	if err != nil {
		return err
	}
	claims = rep.Claims
	ev.receipts = map[*protocol.GoalCondition][]protocol.ClaimVerdict{}
	for _, n := range nodes {
		ev.receipts[n], claims = claims[:len(n.Claims)], claims[len(n.Claims):]
	}
	return nil
}

// decide is one node's verdict.
func (ev *goalEval) decide(ctx context.Context, g *protocol.GoalCondition) (verdict, error) {
	switch g.Type {
	case protocol.GoalStatePredicate:
		return ev.statePredicate(ctx, g)
	case protocol.GoalAllOf, protocol.GoalAnyOf:
		return ev.combine(ctx, g)
	case protocol.GoalToolReceiptsGrounded:
		return ev.receiptsGrounded(g), nil
	case protocol.GoalPlanAchieved:
		return ev.planAchieved(), nil
	case protocol.GoalStateConsistent:
		return ev.stateConsistent(ctx, g)
	}
	ev.underivable[g.Type] = true
	return verdict{reason: fmt.Sprintf("%s is underivable here: it needs a program or a model the daemon does not run, so it fails closed", g.Type)}, nil
}

// combine decides all_of and any_of. The verdict is grounded when it would
// stand whatever the underivable conditions said: all_of that fails on a
// grounded failure, any_of that holds on a grounded success, or either
// when every part is grounded.
func (ev *goalEval) combine(ctx context.Context, g *protocol.GoalCondition) (verdict, error) {
	all := g.Type == protocol.GoalAllOf
	out := verdict{met: all, grounded: true}
	decidedBy := false // a grounded part alone decides the verdict
	reasons := make([]string, len(g.Conditions))
	for i := range g.Conditions {
		v, err := ev.decide(ctx, &g.Conditions[i])
		if err != nil {
			return verdict{}, err
		}
		reasons[i] = v.reason
		if all {
			out.met = out.met && v.met
		} else {
			out.met = out.met || v.met
		}
		out.grounded = out.grounded && v.grounded
		if v.grounded && v.met != all {
			decidedBy = true
		}
	}
	out.grounded = out.grounded || decidedBy
	word := "holds"
	if !out.met {
		word = "fails"
	}
	out.reason = fmt.Sprintf("%s %s: [%s]", g.Type, word, strings.Join(reasons, "; "))
	return out, nil
}

// statePredicate compares the key's value now.
func (ev *goalEval) statePredicate(ctx context.Context, g *protocol.GoalCondition) (verdict, error) {
	op := g.Operator
	if op == "" {
		op = "eq"
	}
	v, present, err := ev.rt.State.Get(ctx, ev.in.Tenant, g.Key)
	if err != nil {
		return verdict{}, store.Wrap(fmt.Sprintf("goal: state key '%s' could not be read", g.Key), err)
	}
	pc := protocol.Precondition{Key: g.Key, Operator: op, Value: g.Value}
	if err := checkPrecondition(pc, v, present); err != nil {
		return verdict{grounded: true, reason: fmt.Sprintf("state '%s' %s %s does not hold", g.Key, op, jsonvalue.Canonical(g.Value))}, nil
	}
	return verdict{met: true, grounded: true, reason: fmt.Sprintf("state '%s' %s %s holds", g.Key, op, jsonvalue.Canonical(g.Value))}, nil
}

// receiptsGrounded is met when every claim is grounded in the proposal's
// receipts.
func (ev *goalEval) receiptsGrounded(g *protocol.GoalCondition) verdict {
	switch {
	case ev.in.ProposalID == "":
		return verdict{grounded: true, reason: "tool_receipts_grounded needs proposal_id: claims are judged against one proposal's receipts"}
	case len(g.Claims) == 0:
		return verdict{grounded: true, reason: "tool_receipts_grounded names no claims: there is nothing to ground"}
	}
	var bad []string
	for _, v := range ev.receipts[g] {
		if v.Verdict != protocol.VerdictGrounded {
			bad = append(bad, v.Verdict+": "+v.Detail)
		}
	}
	if len(bad) > 0 {
		return verdict{grounded: true, reason: fmt.Sprintf("%d of %d claims are not grounded in proposal %s's receipts: %s", len(bad), len(g.Claims), ev.in.ProposalID, limitList(bad))}
	}
	return verdict{met: true, grounded: true, reason: fmt.Sprintf("%d claims grounded in proposal %s's receipts", len(g.Claims), ev.in.ProposalID)}
}

// missingProposal says why a check that reads the proposal's events has no
// input, or "" when it has.
func (ev *goalEval) missingProposal(kind string) string {
	switch {
	case ev.in.ProposalID == "":
		return kind + " needs proposal_id"
	case ev.attempt == nil:
		return fmt.Sprintf("%s: proposal %s has no proposal_received event in the retained log (unknown, or evicted by retention): nothing shows how it ran", kind, ev.in.ProposalID)
	}
	return ""
}

// planAchieved is met when every action of the proposal's latest attempt
// succeeded.
func (ev *goalEval) planAchieved() verdict {
	if why := ev.missingProposal(protocol.GoalPlanAchieved); why != "" {
		return verdict{grounded: true, reason: why}
	}
	a := ev.attempt
	if !a.finished {
		return verdict{grounded: true, reason: fmt.Sprintf("proposal %s has not finished", ev.in.ProposalID)}
	}
	succeeded := 0
	var other []string
	for _, id := range a.order {
		if s := a.final[id]; s == EventActionSucceeded {
			succeeded++
		} else {
			other = append(other, fmt.Sprintf("'%s' %s", id, strings.TrimPrefix(string(s), "action_")))
		}
	}
	if succeeded != a.actions || len(other) > 0 {
		return verdict{grounded: true, reason: fmt.Sprintf("proposal %s: %d of %d actions succeeded (%s)", ev.in.ProposalID, succeeded, a.actions, limitList(other))}
	}
	return verdict{met: true, grounded: true, reason: fmt.Sprintf("proposal %s: all %d actions succeeded", ev.in.ProposalID, a.actions)}
}

// stateConsistent is met when every assumption holds against state now
// and, with a proposal, its transaction check found no conflict.
func (ev *goalEval) stateConsistent(ctx context.Context, g *protocol.GoalCondition) (verdict, error) {
	if ev.in.ProposalID == "" && len(g.Assumptions) == 0 {
		return verdict{grounded: true, reason: "state_consistent needs assumptions, proposal_id, or both"}, nil
	}
	vr, _ := ev.rt.opts.State.(store.VersionReader)
	var bad []string
	for _, as := range g.Assumptions {
		h, err := ev.rt.checkAssumption(ctx, vr, ev.in.Tenant, as)
		if err != nil {
			return verdict{}, store.Wrap(fmt.Sprintf("goal: the assumption on '%s' could not be checked", as.Key), err)
		}
		if as.ReadVersion != nil && vr == nil {
			bad = append(bad, fmt.Sprintf("'%s': this store keeps no versions, so read_version cannot be checked", as.Key))
		}
		if h.stale {
			bad = append(bad, fmt.Sprintf("'%s' was read at version %d and is at %d now", as.Key, *as.ReadVersion, h.version))
		}
		if h.diverged {
			bad = append(bad, fmt.Sprintf("'%s' does not hold the expected value", as.Key))
		}
	}
	if len(bad) > 0 {
		return verdict{grounded: true, reason: "state is not as assumed: " + limitList(bad)}, nil
	}
	parts := []string{}
	if len(g.Assumptions) > 0 {
		parts = append(parts, fmt.Sprintf("%d assumptions hold", len(g.Assumptions)))
	}
	if ev.in.ProposalID != "" {
		if why := ev.missingProposal(protocol.GoalStateConsistent); why != "" {
			return verdict{grounded: true, reason: why}, nil
		}
		a := ev.attempt
		switch {
		case a.txMode == "" || a.txMode == protocol.TransactionCheckOff:
			return verdict{grounded: true, reason: fmt.Sprintf("proposal %s ran with the transaction check off: nothing shows its reads and writes were consistent (session.transaction_check.set {mode: warn} turns it on)", ev.in.ProposalID)}, nil
		case a.txRefused != "":
			return verdict{grounded: true, reason: fmt.Sprintf("proposal %s was refused by the transaction check: %s", ev.in.ProposalID, a.txRefused)}, nil
		case a.conflicts > 0:
			return verdict{grounded: true, reason: fmt.Sprintf("the transaction check found %d conflicts in proposal %s", a.conflicts, ev.in.ProposalID)}, nil
		}
		parts = append(parts, fmt.Sprintf("proposal %s passed the transaction check (%s) with no conflict", ev.in.ProposalID, a.txMode))
	}
	return verdict{met: true, grounded: true, reason: strings.Join(parts, "; ")}, nil
}

// proposalAttempt is a proposal's latest attempt as the event log has it.
type proposalAttempt struct {
	actions   int                  // proposal_received's count
	finished  bool                 // proposal_finished seen
	final     map[string]EventKind // action id → its last status event
	order     []string             // action ids, as first seen
	txMode    string               // the transaction check mode it ran under
	txRefused string               // the transaction check's refusal, when it refused
	conflicts int                  // transaction_conflict events
}

// latestAttempt reads the events of proposal id back to its latest
// proposal_received (a replan's attempt keeps the id). Nil: no such event
// is retained.
func (rt *Runtime) latestAttempt(ctx context.Context, id string) (*proposalAttempt, error) {
	events, _, err := rt.Events.QueryAll(ctx, EventQuery{ProposalID: id})
	if err != nil {
		return nil, err
	}
	a := &proposalAttempt{final: map[string]EventKind{}}
	for i := range events { // newest first
		e := &events[i]
		switch e.Kind {
		case EventProposalReceived:
			n, _ := jsonvalue.ToFloat(e.Data["actions"])
			a.actions = int(n)
			a.txMode, _ = e.Data["transaction_check"].(string)
			slices.Reverse(a.order)
			return a, nil
		case EventProposalFinished:
			a.finished = true
		case EventProposalRejected:
			if e.Data["gate"] == "transaction_check" {
				a.txRefused, _ = e.Data["reason"].(string)
			}
		case EventTransactionConflict:
			a.conflicts++
		case EventActionSucceeded, EventActionFailed, EventActionRejected, EventActionSkipped:
			if _, seen := a.final[e.ActionID]; !seen {
				a.final[e.ActionID] = e.Kind
				a.order = append(a.order, e.ActionID)
			}
		}
	}
	return nil, nil
}

// Recorder says who records a goal verdict or a turn decision: the
// connection, its principal (agent, plain or host), its bound agent ("":
// none) and the run it has in progress ("": none). The caller fills it
// from the connection, never from params.
type Recorder struct {
	Connection string
	Principal  string
	Agent      string
	RunID      string
}

// data is the recorder's part of an event's data.
func (r Recorder) data(d map[string]any) map[string]any {
	d["principal"] = r.Principal
	if r.Agent != "" {
		d["agent"] = r.Agent
	}
	if r.RunID != "" {
		d["run_id"] = r.RunID
	}
	return d
}

// RecordGoalEvaluated appends a goal_evaluated event and returns it once
// the durable log holds it. The condition is checked as goals.evaluate
// checks one, and recorded as raw holds it (every member, numbers exact).
func (rt *Runtime) RecordGoalEvaluated(ctx context.Context, by Recorder, p *protocol.GoalsRecordParams, raw json.RawMessage) (Event, error) {
	if err := rt.CheckGoal(p.Condition); err != nil {
		return Event{}, err
	}
	var cond any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&cond); err != nil {
		return Event{}, fmt.Errorf("condition: %w", err)
	}
	data := by.data(map[string]any{
		"goal": p.Goal, "condition": cond, "iteration": *p.Iteration, "met": *p.Met, "grounded": *p.Grounded,
		"reason": p.Reason, "model": p.Model, "model_tier": p.ModelTier,
	})
	return rt.appendDurable(ctx, Event{Kind: EventGoalEvaluated, Connection: by.Connection, Data: data})
}

// RecordTurnCompleted appends a turn_completed event and returns it once
// the durable log holds it.
func (rt *Runtime) RecordTurnCompleted(ctx context.Context, by Recorder, p *protocol.TurnsRecordCompletedParams) (Event, error) {
	data := by.data(map[string]any{
		"decision": p.Decision, "stop_reason": p.StopReason, "was_truncated": *p.WasTruncated, "turns": *p.Turns, "model": p.Model,
	})
	return rt.appendDurable(ctx, Event{Kind: EventTurnCompleted, Connection: by.Connection, Data: data})
}

// appendDurable appends e and waits for the durable log to hold it.
func (rt *Runtime) appendDurable(ctx context.Context, e Event) (Event, error) {
	e = rt.Events.Append(e)
	if err := rt.Events.Durable(ctx); err != nil {
		return e, err
	}
	return e, nil
}
