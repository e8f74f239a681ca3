package engine

import (
	"fmt"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Per-agent postures. A connection bound to an agent (session.auth
// {agent_id}) submits under that agent's posture as well as its session's
// tier: for each action, the mode its posture gives the action's tier
// decides. deny blocks at any tier; require_approval needs a recorded
// approval (and parks like any needs_approval row); always_allow admits
// without one, up to that tier. A ledger rejection still denies.

// Posture modes (agent_permissions).
const (
	PostureAlwaysAllow     = "always_allow"
	PostureRequireApproval = "require_approval"
	PostureDeny            = "deny"
)

// EventAgentPosture is one decision of an agent's posture.
const EventAgentPosture EventKind = "agent_posture"

// PostureSource resolves an agent's mode at a tier (the agents package's
// Postures).
type PostureSource interface {
	Resolve(agentID string, tier policy.Tier) (mode string, override bool)
}

// applyPosture adjusts the permission rows of a bound agent's submission
// to its posture and records each decision as an event.
func (rt *Runtime) applyPosture(sub *Submission, rows []PermissionRow) {
	if sub.Agent == "" || rt.opts.Postures == nil {
		return
	}
	for i := range rows {
		r := &rows[i]
		mode, override := rt.postureDecide(sub.Agent, r)
		rt.Events.Append(Event{Kind: EventAgentPosture, ProposalID: sub.Proposal.ID, ActionID: r.ActionID, Connection: sub.Session.ID, Data: map[string]any{
			"agent": sub.Agent, "tier": r.Required.String(), "mode": mode, "has_override": override, "decision": r.Decision, "tool": r.Tool,
		}})
	}
}

// EvaluateAgentPermissions is EvaluatePermissions as a submission of agent
// would be decided, its posture applied, so that permission.evaluate on a
// bound connection previews what the gate will do. A preview records no
// posture event; an empty agent is EvaluatePermissions.
func (rt *Runtime) EvaluateAgentPermissions(p *protocol.ActionProposal, granted policy.Tier, agent string) []PermissionRow {
	rows := rt.EvaluatePermissions(p, granted)
	if agent == "" || rt.opts.Postures == nil {
		return rows
	}
	for i := range rows {
		rt.postureDecide(agent, &rows[i])
	}
	return rows
}

// postureDecide adjusts one row to agent's mode at the row's tier and
// returns that mode.
func (rt *Runtime) postureDecide(agent string, r *PermissionRow) (mode string, override bool) {
	mode, override = rt.opts.Postures.Resolve(agent, r.Required)
	switch before := r.Decision; {
	case before == DecisionDeny:
		// A rejection on the ledger stands whatever the posture says.
	case mode == PostureDeny:
		r.Decision = DecisionDeny
		r.Reason = fmt.Sprintf("agent '%s' may not take %s actions (agent_permissions: deny)", agent, r.Required)
	case mode == PostureRequireApproval && before == DecisionAllow && !rt.approvedOnRecord(r.Fingerprint, r.Required):
		r.Decision = DecisionNeedsApproval
		r.Reason = fmt.Sprintf("agent '%s' needs an approval for %s actions (agent_permissions: require_approval)", agent, r.Required)
	case mode == PostureAlwaysAllow && before == DecisionNeedsApproval:
		r.Decision = DecisionAllow
		r.Reason = fmt.Sprintf("agent '%s' is trusted with %s actions (agent_permissions: always_allow)", agent, r.Required)
	}
	return mode, override
}

// approvedOnRecord reports whether the ledger holds an approval of the
// operation at or above tier.
func (rt *Runtime) approvedOnRecord(fingerprint string, tier policy.Tier) bool {
	if rt.opts.Approvals == nil {
		return false
	}
	rec, ok := rt.opts.Approvals.Decision(fingerprint)
	return ok && approvedAtOrAbove(rec, tier)
}
