package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// decodeProposalParam reads the permission methods' {proposal}, within
// max_actions and with ids minted as proposal.submit would. method names
// the caller when it refuses upstream's skill param (permission.evaluate
// and permission.pending), "" when skill is ignored.
func (c *conn) decodeProposalParam(params *json.RawMessage, method string) (*protocol.ActionProposal, error) {
	var p protocol.PermissionProposalParams
	if err := decodeParams(params, &p, "{proposal: ActionProposal}"); err != nil {
		return nil, err
	}
	if method != "" && p.Skill != nil {
		// A skill would narrow the decision to a skill's ceiling: this
		// daemon has none, and ignoring it would answer a looser decision
		// than the caller asked for.
		return nil, invalidParams("%s: param 'skill' is not supported: this daemon has no skill ceiling, so the decision would ignore it; drop 'skill' to evaluate at the connection's tier", method)
	}
	return c.decodeAnalysed(json.RawMessage(p.Proposal), "")
}

func (c *conn) permissionGetTier(context.Context, *json.RawMessage) (any, error) {
	return protocol.TierResult{GrantedTier: c.sess.Tier().String()}, nil
}

func (c *conn) permissionSetTier(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SetTierParams
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
	return protocol.TierResult{GrantedTier: t.String()}, nil
}

func (c *conn) permissionClassify(_ context.Context, params *json.RawMessage) (any, error) {
	prop, err := c.decodeProposalParam(params, "")
	if err != nil {
		return nil, err
	}
	res := protocol.ClassifyResult{
		Classifications:          make([]protocol.Classification, len(prop.Actions)),
		DeclaredRollbackContract: protocol.Reversible, // an empty batch has nothing to undo
	}
	for i := range prop.Actions {
		a := &prop.Actions[i]
		cl := c.srv.rt.Classify(a)
		res.Classifications[i] = protocol.Classification{ActionID: a.ID, Tool: a.Tool, RequiredTier: cl.Tier.String(), Reversibility: cl.Reversibility, Signals: cl.Signals,
			MissingCompensation: a.Reversibility == protocol.Compensable && len(a.Compensation) == 0}
		if a.Reversibility.Rank() > res.DeclaredRollbackContract.Rank() {
			res.DeclaredRollbackContract = a.Reversibility
		}
	}
	return res, nil
}

func (c *conn) permissionEvaluate(ctx context.Context, params *json.RawMessage) (any, error) {
	prop, err := c.decodeProposalParam(params, protocol.MethodPermissionEvaluate)
	if err != nil {
		return nil, err
	}
	rows := c.srv.rt.EvaluateAgentPermissions(prop, c.sess.Tier(), c.agentID())
	res := protocol.EvaluateResult{Decisions: make([]protocol.PermissionDecision, len(rows))}
	for i, r := range rows {
		res.Decisions[i] = permissionDecision(r)
	}
	if res.Intent, err = c.srv.rt.EvaluateIntent(ctx, prop, c.sess, ""); err != nil {
		return nil, storeError(protocol.MethodPermissionEvaluate, "nothing was evaluated", err)
	}
	return res, nil
}

func (c *conn) permissionPending(_ context.Context, params *json.RawMessage) (any, error) {
	prop, err := c.decodeProposalParam(params, protocol.MethodPermissionPending)
	if err != nil {
		return nil, err
	}
	res := protocol.PendingResult{Pending: []protocol.PermissionDecision{}}
	for _, r := range c.srv.rt.EvaluateAgentPermissions(prop, c.sess.Tier(), c.agentID()) {
		if r.Decision == engine.DecisionNeedsApproval {
			res.Pending = append(res.Pending, permissionDecision(r))
		}
	}
	return res, nil
}

// permissionDecision is the engine's verdict on one action as the wire
// shows it.
func permissionDecision(r engine.PermissionRow) protocol.PermissionDecision {
	return protocol.PermissionDecision{ActionID: r.ActionID, Tool: r.Tool, Fingerprint: r.Fingerprint, Decision: r.Decision, Required: r.Required.String(),
		Reversibility: r.Reversibility, Granted: r.Granted.String(), Reason: r.Reason, Signals: r.Signals}
}

func (c *conn) permissionApprove(_ context.Context, params *json.RawMessage) (any, error) {
	if err := c.mayApprove("permission.approve"); err != nil {
		return nil, err
	}
	return c.decideOperation(params, true)
}

func (c *conn) permissionReject(_ context.Context, params *json.RawMessage) (any, error) {
	if err := c.mayApprove("permission.reject"); err != nil {
		return nil, err
	}
	return c.decideOperation(params, false)
}

// decideOperation takes {fingerprint, required_tier, reason?, evidence?} or
// {action, reason?, evidence?} and hands the decision to the engine's one
// decision path. The reviewer is this connection, stamped here: it is never
// read from params.
func (c *conn) decideOperation(params *json.RawMessage, approved bool) (any, error) {
	var p protocol.DecisionParams
	const shape = "{fingerprint: string, required_tier: string, reason?, evidence?, expires_in?, uses?} or {action: Action, reason?, evidence?, expires_in?, uses?}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := approvals.CheckLimits(p.Limits, approved); err != nil {
		return nil, invalidParams("%v", err)
	}
	d := engine.Decision{Approved: approved, Reviewer: c.reviewer(), Notes: p.Reason, Evidence: p.Evidence, Limits: p.Limits}
	switch {
	case len(p.Action) > 0 && string(p.Action) != "null":
		prop, err := c.decodeProposal([]byte(`{"actions":[` + string(p.Action) + `]}`))
		if err != nil {
			return nil, invalidParams("param 'action': %v", err)
		}
		a := &prop.Actions[0]
		d.Fingerprint, d.Tier = approvals.Fingerprint(a), c.srv.rt.Classify(a).Tier
		var rec approvals.Record
		approvals.Operation(&rec, a)
		// No session asked for it yet: the record names no granted tier.
		d.Operation = host.Operation{Type: rec.Type, Tool: rec.Tool, ParamsDigest: rec.ParamsDigest}
	case p.Fingerprint != "":
		t, err := policy.ParseTier(p.RequiredTier)
		if err != nil {
			return nil, invalidParams("param 'required_tier': %v (it is in the permission.evaluate row)", err)
		}
		d.Fingerprint, d.Tier = p.Fingerprint, t
	default:
		return nil, invalidParams("params must be %s", shape)
	}
	res, err := c.srv.rt.ResolveApproval(c.id, d)
	if err != nil {
		return nil, internalError("%v", err)
	}
	return *res.Record, nil
}
