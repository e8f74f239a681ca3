package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Permission decisions.
const (
	DecisionAllow         = "allow"
	DecisionNeedsApproval = "needs_approval"
	DecisionDeny          = "deny"
)

// PermissionRow is the permission verdict on one action (permission.evaluate).
type PermissionRow struct {
	ActionID      string                 `json:"action_id"`
	Type          protocol.ActionType    `json:"type,omitempty"`
	Tool          string                 `json:"tool,omitempty"`
	Fingerprint   string                 `json:"fingerprint"`
	Decision      string                 `json:"decision"`
	Required      policy.Tier            `json:"required"`
	Reversibility protocol.Reversibility `json:"reversibility"`
	Granted       policy.Tier            `json:"granted"`
	Reason        string                 `json:"reason,omitempty"`
	Signals       []string               `json:"signals,omitempty"` // the classifier's reasons for Required
	// Quorum is how many distinct people must approve (an operator quorum
	// rule); 0 when no rule matches.
	Quorum int `json:"quorum,omitempty"`
	// byApproval: allowed only by an approval on the ledger, which the
	// admission takes a use of (store.Approvals.Use).
	byApproval bool
}

// Tier is the session's standing permission tier (default sandbox_edit).
func (s *Session) Tier() policy.Tier { return policy.Tier(s.tier.Load()) }

// SetTier changes the session's standing tier.
func (s *Session) SetTier(t policy.Tier) { s.tier.Store(int32(t)) }

// Approvals is the daemon's approval ledger, or nil when it has none.
func (rt *Runtime) Approvals() store.Approvals { return rt.opts.Approvals }

// EvaluatePermissions decides every action of p against the granted tier and
// the approval ledger: a rejected fingerprint denies; a full_access action,
// or one above the grant, needs an approval recorded at or above its true
// tier; everything else is allowed.
func (rt *Runtime) EvaluatePermissions(p *protocol.ActionProposal, granted policy.Tier) []PermissionRow {
	rows := make([]PermissionRow, len(p.Actions))
	for i := range p.Actions {
		a := &p.Actions[i]
		c := rt.Classify(a)
		row := PermissionRow{ActionID: a.ID, Type: a.Type, Tool: a.Tool, Fingerprint: approvals.Fingerprint(a), Required: c.Tier, Reversibility: c.Reversibility, Granted: granted, Decision: DecisionAllow, Signals: c.Signals, Quorum: rt.quorumOf(a)}
		var rec approvals.Record
		var recorded bool
		if rt.opts.Approvals != nil {
			rec, recorded = rt.opts.Approvals.Decision(row.Fingerprint)
			if recorded && !approvals.Live(rec, time.Now()) {
				recorded = false // expired or used up: gone, so asked again
			}
		}
		switch {
		case recorded && rec.Decision == approvals.Rejected:
			row.Decision = DecisionDeny
			row.Reason = fmt.Sprintf("rejected by %s", rec.Reviewer)
			if rec.Reason != "" {
				row.Reason += ": " + rec.Reason
			}
		case row.Quorum > 0 || c.Tier == policy.FullAccess || c.Tier > granted:
			if recorded && approvedAtOrAbove(rec, c.Tier) && quorumMet(rec, row.Quorum) {
				row.Reason = fmt.Sprintf("approved by %s", rec.Reviewer)
				if row.Quorum > 1 {
					row.Reason = fmt.Sprintf("approved by %s", strings.Join(people(rec.Approvers), ", "))
				}
				row.byApproval = true
				break
			}
			row.Decision = DecisionNeedsApproval
			row.Reason = fmt.Sprintf("needs %s (%s)", c.Tier, strings.Join(c.Signals, ", "))
			if c.Tier == policy.FullAccess {
				row.Reason += "; full_access always needs a recorded approval"
			}
			if row.Quorum > 0 {
				row.Reason += fmt.Sprintf("; a quorum rule needs %d distinct people to approve tool '%s'", row.Quorum, a.Tool)
			}
			switch {
			case recorded && approvedAtOrAbove(rec, c.Tier):
				row.Reason += fmt.Sprintf("; %d of %d approved so far", len(people(rec.Approvers)), row.Quorum)
			case recorded && rec.Decision == approvals.Approved:
				row.Reason += fmt.Sprintf("; the approval on record is for %s only", rec.RequiredTier)
			}
		}
		rows[i] = row
	}
	return rows
}

// EventApprovalUsed: a proposal took a use of an approval on the ledger
// (admitted by it, or released by it from a wait).
const EventApprovalUsed EventKind = "approval_used"

// approvalUsed records that sub's action took a use of rec: with the
// approval's decision, who made it, and what is left of it.
func (rt *Runtime) approvalUsed(sub *Submission, actionID string, rec approvals.Record) {
	data := map[string]any{"fingerprint": rec.Fingerprint, "reviewer": rec.Reviewer, "required_tier": rec.RequiredTier, "used": rec.Used, "recorded_at": rec.RecordedAt}
	if rec.Uses > 0 {
		data["uses"] = rec.Uses
	}
	if len(rec.Approvers) > 0 {
		data["approvers"] = rec.Approvers
	}
	rt.Events.Append(Event{Kind: EventApprovalUsed, ProposalID: sub.Proposal.ID, ActionID: actionID, Connection: sub.Session.ID, Data: data})
}

// approvedAtOrAbove: an approval counts only at or above the true tier, so an
// under-scoped approval cannot widen access.
func approvedAtOrAbove(rec approvals.Record, tier policy.Tier) bool {
	t, err := policy.ParseTier(rec.RequiredTier)
	return err == nil && rec.Decision == approvals.Approved && t >= tier
}

// checkResolved re-decides an action whose parameters were built from
// references, now that they are resolved: the admission gate saw only the
// $id.output placeholders, and a reference must not carry an operation past
// the tier (a command read from state, say). The resolved operation needs its
// own approval when it needs one at all.
func (rt *Runtime) checkResolved(ctx context.Context, sub *Submission, a *protocol.Action) error {
	p := &protocol.ActionProposal{Actions: []protocol.Action{*a}}
	rows := rt.EvaluatePermissions(p, sub.Session.Tier())
	rt.applyPosture(sub, rows)
	if err := rt.useApprovals(ctx, sub, rows); err != nil {
		return fmt.Errorf("with its references resolved, action '%s': %w", a.ID, err)
	}
	r := rows[0]
	switch r.Decision {
	case DecisionNeedsApproval:
		if rt.canPark() {
			// Park mid-run, like the gate does at admission; the person
			// sees the resolved parameters.
			denied, err := rt.awaitApprovals(ctx, sub, []PermissionRow{r}, func(string) map[string]any { return a.Parameters })
			if err != nil {
				return fmt.Errorf("with its references resolved, action '%s' needs %s: %w", a.ID, r.Required, err)
			}
			if reason, ok := denied[a.ID]; ok {
				return errors.New(reason)
			}
			return nil
		}
		return fmt.Errorf("with its references resolved, action '%s' needs %s (granted %s): approve fingerprint %s with permission.approve {fingerprint: \"%s\", required_tier: \"%s\"}",
			a.ID, r.Required, r.Granted, r.Fingerprint, r.Fingerprint, r.Required)
	case DecisionDeny:
		return fmt.Errorf("with its references resolved, action '%s' (fingerprint %s) is denied: %s", a.ID, r.Fingerprint, r.Reason)
	}
	return nil
}

// freshPermissions decides sub's actions, with its agent's posture applied.
// When some need an approval that the ledger's local copy lacks, their
// decisions are first re-read from the store: the copy of a ledger shared
// by several daemons follows the others a notification behind, and an
// approval committed on another daemon a moment ago counts here too. An
// admission that needs no new decision never waits on the store. stale
// says the store could not be read; the rows are then the local copy's.
func (rt *Runtime) freshPermissions(ctx context.Context, sub *Submission) (rows []PermissionRow, stale error) {
	rows = rt.EvaluatePermissions(sub.Proposal, sub.Session.Tier())
	if rt.opts.Approvals != nil {
		var missing []string
		for _, r := range rows { // a copy: the posture is applied below, with its events
			if sub.Agent != "" && rt.opts.Postures != nil {
				rt.postureDecide(sub.Agent, &r)
			}
			if r.Decision == DecisionNeedsApproval {
				missing = append(missing, r.Fingerprint)
			}
		}
		if len(missing) > 0 {
			if err := rt.opts.Approvals.Refresh(ctx, missing...); err != nil {
				stale = store.Wrap("the approval ledger could not be read for decisions made on the other daemons", err)
			} else {
				rows = rt.EvaluatePermissions(sub.Proposal, sub.Session.Tier())
			}
		}
	}
	rt.applyPosture(sub, rows)
	return rows, stale
}

// ledgerDecision returns fingerprint's decision as the ledger's local copy
// holds it or, when the copy holds none that rejects it or approves it at
// tier, as the store holds it now (see freshPermissions: the copy of a
// shared ledger follows the other daemons a notification behind). An error
// says the store could not be read; rec and ok are then the copy's.
func (rt *Runtime) ledgerDecision(ctx context.Context, fingerprint string, tier policy.Tier) (rec approvals.Record, ok bool, err error) {
	led := rt.opts.Approvals
	if led == nil {
		return approvals.Record{}, false, nil
	}
	rec, ok = led.Decision(fingerprint)
	if ok && (rec.Decision == approvals.Rejected || approvedAtOrAbove(rec, tier)) && approvals.Live(rec, time.Now()) {
		return rec, true, nil
	}
	if err := led.Refresh(ctx, fingerprint); err != nil {
		return rec, ok, store.Wrap("the approval ledger could not be read for decisions made on the other daemons", err)
	}
	rec, ok = led.Decision(fingerprint)
	if ok && !approvals.Live(rec, time.Now()) {
		return approvals.Record{}, false, nil
	}
	return rec, ok, nil
}

// permissionGate admits a proposal only when every action is allowed for
// the submitting session's tier and the ledger; otherwise the whole proposal
// is blocked and the error names what to approve.
type permissionGate struct{ rt *Runtime }

func (permissionGate) Name() string { return "permission" }

func (g permissionGate) Admit(ctx context.Context, sub *Submission) error {
	rows, stale := g.rt.freshPermissions(ctx, sub)
	if err := g.rt.useApprovals(ctx, sub, rows); err != nil {
		return fmt.Errorf("permission gate blocked the proposal: %w", err)
	}
	if g.rt.tracing() && len(rows) == len(sub.Proposal.Actions) {
		sub.tiers = make([]policy.Tier, len(rows)) // for the execute_tool spans (spans.go)
		for i, r := range rows {
			sub.tiers[i] = r.Required
		}
	}
	// The message lists the first few problems: it is the error of every
	// action of the proposal.
	var problems []string
	allowed, waiting, blocked := 0, 0, 0
	for _, r := range rows {
		if r.Decision == DecisionAllow {
			allowed++
			continue
		}
		g.rt.Events.Append(Event{Kind: EventPermissionDecision, ProposalID: sub.Proposal.ID, ActionID: r.ActionID, Connection: sub.Session.ID, Data: map[string]any{
			"decision": r.Decision, "required": r.Required.String(), "granted": r.Granted.String(), "reversibility": string(r.Reversibility), "fingerprint": r.Fingerprint, "tool": r.Tool,
		}})
		blocked++
		listed := len(problems) < maxNamesInMessage
		switch {
		case r.Decision == DecisionNeedsApproval:
			waiting++
			if !listed {
				break
			}
			problems = append(problems, fmt.Sprintf("action '%s' needs %s (granted %s): approve fingerprint %s with permission.approve {fingerprint: \"%s\", required_tier: \"%s\"}",
				r.ActionID, r.Required, r.Granted, r.Fingerprint, r.Fingerprint, r.Required))
		case r.Decision == DecisionDeny && listed:
			problems = append(problems, fmt.Sprintf("action '%s' (fingerprint %s, needs %s, granted %s) is denied: %s", r.ActionID, r.Fingerprint, r.Required, r.Granted, r.Reason))
		}
	}
	// Allowed actions are summed up in one event rather than one each.
	if allowed > 0 {
		g.rt.Events.Append(Event{Kind: EventPermissionDecision, ProposalID: sub.Proposal.ID, Connection: sub.Session.ID, Data: map[string]any{
			"decision": DecisionAllow, "actions": allowed, "granted": sub.Session.Tier().String(),
		}})
	}
	if blocked == 0 {
		return nil
	}
	listed := strings.Join(problems, "; ")
	if more := blocked - len(problems); more > 0 {
		listed += fmt.Sprintf("; and %d more actions (permission.evaluate lists the decision on every action)", more)
	}
	if stale != nil {
		// Whether an approval was recorded elsewhere cannot be told: say so
		// rather than ask a person for a decision that cannot be recorded.
		return fmt.Errorf("permission gate blocked the proposal: %s; %w", listed, stale)
	}
	// Only approvals missing, and a person watching: wait for them.
	if waiting == blocked && g.rt.canPark() {
		denied, err := g.rt.awaitApprovals(ctx, sub, rows, proposalParams(sub.Proposal))
		if err != nil {
			return fmt.Errorf("permission gate blocked the proposal: %w", err)
		}
		sub.denied = denied
		return nil
	}
	return fmt.Errorf("permission gate blocked the proposal: %s", listed)
}

// useApprovals takes one use of each distinct approval that allows a row
// (an admission is one use, however many of its actions share the
// operation). A row whose approval expired or was spent meanwhile (another
// admission took its last use) then needs an approval again.
func (rt *Runtime) useApprovals(ctx context.Context, sub *Submission, rows []PermissionRow) error {
	taken := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if !r.byApproval || r.Decision != DecisionAllow {
			continue
		}
		ok, seen := taken[r.Fingerprint]
		if !seen {
			rec, used, err := rt.opts.Approvals.Use(ctx, r.Fingerprint, time.Now())
			if err != nil {
				return store.Wrap("the approval ledger could not count the use of an approval", err)
			}
			ok, taken[r.Fingerprint] = used, used
			if used {
				rt.approvalUsed(sub, r.ActionID, rec)
			}
		}
		if !ok {
			r.Decision, r.byApproval = DecisionNeedsApproval, false
			r.Reason = fmt.Sprintf("needs %s; the approval on record expired or its uses were spent", r.Required)
		}
	}
	return nil
}
