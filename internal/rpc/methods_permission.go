package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// decodeProposalParam reads {proposal} for the permission methods, within
// max_actions and with ids minted as proposal.submit would.
func (c *conn) decodeProposalParam(params *json.RawMessage) (*protocol.ActionProposal, error) {
	var p struct {
		Proposal json.RawMessage `json:"proposal"`
	}
	if err := decodeParams(params, &p, "{proposal: ActionProposal}"); err != nil {
		return nil, err
	}
	return c.decodeAnalysed(p.Proposal, "")
}

func (c *conn) permissionGetTier(context.Context, *json.RawMessage) (any, error) {
	return map[string]any{"granted_tier": c.sess.Tier()}, nil
}

func (c *conn) permissionSetTier(_ context.Context, params *json.RawMessage) (any, error) {
	var p struct {
		Tier string `json:"tier"`
	}
	const shape = "{tier: read_only|sandbox_edit|full_access}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	t, err := policy.ParseTier(p.Tier)
	if err != nil {
		return nil, invalidParams("param 'tier': %v", err)
	}
	// Raising one's own tier is self-approval by another name.
	if t > c.sess.Tier() {
		if err := c.mayApprove("raising the permission tier"); err != nil {
			return nil, err
		}
	}
	c.sess.SetTier(t)
	return map[string]any{"granted_tier": t}, nil
}

func (c *conn) permissionClassify(_ context.Context, params *json.RawMessage) (any, error) {
	prop, err := c.decodeProposalParam(params)
	if err != nil {
		return nil, err
	}
	type row struct {
		ActionID            string                 `json:"action_id"`
		Tool                string                 `json:"tool,omitempty"`
		RequiredTier        policy.Tier            `json:"required_tier"`
		Reversibility       protocol.Reversibility `json:"reversibility"`
		MissingCompensation bool                   `json:"missing_compensation"`
		Signals             []string               `json:"signals"`
	}
	rows := make([]row, len(prop.Actions))
	contract := protocol.Reversible // an empty batch has nothing to undo
	for i := range prop.Actions {
		a := &prop.Actions[i]
		cl := policy.Classify(a)
		rows[i] = row{ActionID: a.ID, Tool: a.Tool, RequiredTier: cl.Tier, Reversibility: cl.Reversibility, Signals: cl.Signals,
			MissingCompensation: a.Reversibility == protocol.Compensable && len(a.Compensation) == 0}
		if a.Reversibility.Rank() > contract.Rank() {
			contract = a.Reversibility
		}
	}
	return map[string]any{"classifications": rows, "declared_rollback_contract": contract}, nil
}

// refuseSkill refuses upstream's skill param, which would narrow the
// decision to a skill's ceiling: this daemon has none, and ignoring it
// would answer a looser decision than the caller asked for.
func refuseSkill(method string, params *json.RawMessage) error {
	var p struct {
		Skill json.RawMessage `json:"skill"`
	}
	if params == nil || json.Unmarshal(*params, &p) != nil || p.Skill == nil {
		return nil
	}
	return invalidParams("%s: param 'skill' is not supported: this daemon has no skill ceiling, so the decision would ignore it; drop 'skill' to evaluate at the connection's tier", method)
}

func (c *conn) permissionEvaluate(_ context.Context, params *json.RawMessage) (any, error) {
	if err := refuseSkill(protocol.MethodPermissionEvaluate, params); err != nil {
		return nil, err
	}
	prop, err := c.decodeProposalParam(params)
	if err != nil {
		return nil, err
	}
	return map[string]any{"decisions": c.srv.rt.EvaluateAgentPermissions(prop, c.sess.Tier(), c.agentID())}, nil
}

func (c *conn) permissionPending(_ context.Context, params *json.RawMessage) (any, error) {
	if err := refuseSkill(protocol.MethodPermissionPending, params); err != nil {
		return nil, err
	}
	prop, err := c.decodeProposalParam(params)
	if err != nil {
		return nil, err
	}
	pending := []engine.PermissionRow{}
	for _, r := range c.srv.rt.EvaluateAgentPermissions(prop, c.sess.Tier(), c.agentID()) {
		if r.Decision == engine.DecisionNeedsApproval {
			pending = append(pending, r)
		}
	}
	return map[string]any{"pending": pending}, nil
}

func (c *conn) permissionApprove(_ context.Context, params *json.RawMessage) (any, error) {
	if err := c.mayApprove("permission.approve"); err != nil {
		return nil, err
	}
	return c.recordDecision(params, approvals.Approved)
}

func (c *conn) permissionReject(_ context.Context, params *json.RawMessage) (any, error) {
	if err := c.mayApprove("permission.reject"); err != nil {
		return nil, err
	}
	return c.recordDecision(params, approvals.Rejected)
}

// recordDecision takes {fingerprint, required_tier, reason?, evidence?} or
// {action, reason?, evidence?}. The reviewer is this connection, stamped
// here: it is never read from params.
func (c *conn) recordDecision(params *json.RawMessage, decision string) (any, error) {
	var p struct {
		Fingerprint  string          `json:"fingerprint"`
		RequiredTier string          `json:"required_tier"`
		Action       json.RawMessage `json:"action"`
		Reason       string          `json:"reason"`
		Evidence     any             `json:"evidence"`
	}
	const shape = "{fingerprint: string, required_tier: string, reason?, evidence?} or {action: Action, reason?, evidence?}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	rec := approvals.Record{Decision: decision, Reviewer: "conn:" + c.id, Reason: p.Reason, Evidence: p.Evidence}
	switch {
	case len(p.Action) > 0 && string(p.Action) != "null":
		prop, err := protocol.DecodeProposal([]byte(`{"actions":[` + string(p.Action) + `]}`))
		if err != nil {
			return nil, invalidParams("param 'action': %v", err)
		}
		a := &prop.Actions[0]
		rec.Fingerprint = approvals.Fingerprint(a)
		rec.RequiredTier = policy.Classify(a).Tier.String()
	case p.Fingerprint != "":
		t, err := policy.ParseTier(p.RequiredTier)
		if err != nil {
			return nil, invalidParams("param 'required_tier': %v (it is in the permission.evaluate row)", err)
		}
		rec.Fingerprint, rec.RequiredTier = p.Fingerprint, t.String()
	default:
		return nil, invalidParams("params must be %s", shape)
	}
	stored, err := c.srv.rt.RecordDecision(c.id, rec)
	if err != nil {
		return nil, internalError("record the decision: %v", err)
	}
	return stored, nil
}
