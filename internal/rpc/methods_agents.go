package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/agents"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Per-agent postures (agent_permissions.*). Every mutation needs the host
// role and returns the whole policy; a bound agent may tighten its own
// posture but never loosen it.

// postures is the store, or the error every method answers without one.
func (c *conn) postures() (*agents.Postures, error) {
	if c.srv.opts.Postures == nil {
		return nil, internalError("per-agent postures are off on this daemon")
	}
	return c.srv.opts.Postures, nil
}

// optionalTier parses a tier param; "" is nil.
func optionalTier(s string) (*policy.Tier, error) {
	if s == "" {
		return nil, nil
	}
	t, err := policy.ParseTier(s)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	return &t, nil
}

func (c *conn) agentPermissionsGet(context.Context, *json.RawMessage) (any, error) {
	ps, err := c.postures()
	if err != nil {
		return nil, err
	}
	return agentPostures(ps.Get()), nil
}

// agentPostures is the wire form of the per-agent postures.
func agentPostures(pol agents.Policy) protocol.AgentPostures {
	out := protocol.AgentPostures{Default: protocol.TierPosture(pol.Default)}
	if pol.Agents != nil {
		out.Agents = make(map[string]protocol.TierPosture, len(pol.Agents))
		for id, t := range pol.Agents {
			out.Agents[id] = protocol.TierPosture(t)
		}
	}
	return out
}

const postureSetShape = "{agent_id: string, mode: always_allow|require_approval|deny, tier?: read_only|sandbox_edit|full_access}"

func (c *conn) agentPermissionsSet(ctx context.Context, params *json.RawMessage) (any, error) {
	ps, err := c.postures()
	if err != nil {
		return nil, err
	}
	var p protocol.AgentPermissionsSetParams
	if err := decodeParams(params, &p, postureSetShape); err != nil {
		return nil, err
	}
	if err := requireString("agent_id", p.AgentID, postureSetShape); err != nil {
		return nil, err
	}
	tier, err := optionalTier(p.Tier)
	if err != nil {
		return nil, err
	}
	self := c.agentID() == p.AgentID && !c.isHost()
	if !self && !c.isHost() {
		return nil, hostOnly(protocol.MethodAgentPermissionsSet)
	}
	pol, err := ps.Set(ctx, p.AgentID, p.Mode, tier, self)
	switch {
	case errors.Is(err, agents.ErrLoosen):
		return nil, rpcError(protocol.CodeApprovalDenied, "%v; a person with the host role can", err)
	case err != nil:
		return nil, invalidParams("agent_permissions.set: %v", err)
	}
	return agentPostures(pol), nil
}

// hostOnly refuses a posture mutation without the host role.
func hostOnly(method string) error {
	return rpcError(protocol.CodeApprovalDenied, "%s needs the host role: authenticate with session.auth {host_token}, read from the daemon's host-token file", method)
}

func (c *conn) agentPermissionsSetDefault(ctx context.Context, params *json.RawMessage) (any, error) {
	ps, err := c.postures()
	if err != nil {
		return nil, err
	}
	var p protocol.AgentPermissionsSetDefaultParams
	if err := decodeParams(params, &p, "{preset: cautious|balanced|trusting} or {tier, mode}"); err != nil {
		return nil, err
	}
	if !c.isHost() {
		return nil, hostOnly(protocol.MethodAgentPermissionsSetDefault)
	}
	tier, err := optionalTier(p.Tier)
	if err != nil {
		return nil, err
	}
	pol, err := ps.SetDefault(ctx, p.Preset, tier, p.Mode)
	if err != nil {
		return nil, invalidParams("agent_permissions.set_default: %v", err)
	}
	return agentPostures(pol), nil
}

func (c *conn) agentPermissionsReset(ctx context.Context, params *json.RawMessage) (any, error) {
	ps, err := c.postures()
	if err != nil {
		return nil, err
	}
	agentID, err := stringParam(params, "agent_id")
	if err != nil {
		return nil, err
	}
	if !c.isHost() {
		return nil, hostOnly(protocol.MethodAgentPermissionsReset)
	}
	pol, err := ps.Reset(ctx, agentID)
	if err != nil {
		return nil, internalError("agent_permissions.reset: %v", err)
	}
	return agentPostures(pol), nil
}

func (c *conn) agentPermissionsEvaluate(_ context.Context, params *json.RawMessage) (any, error) {
	ps, err := c.postures()
	if err != nil {
		return nil, err
	}
	var p protocol.AgentPermissionsEvaluateParams
	const shape = "{agent_id: string, tier: read_only|sandbox_edit|full_access}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("agent_id", p.AgentID, shape); err != nil {
		return nil, err
	}
	if err := requireString("tier", p.Tier, shape); err != nil {
		return nil, err
	}
	tier, err := optionalTier(p.Tier)
	if err != nil {
		return nil, err
	}
	mode, override := ps.Resolve(p.AgentID, *tier)
	return protocol.AgentPermissionsEvaluateResult{AgentID: p.AgentID, Tier: p.Tier, Mode: mode, HasOverride: override}, nil
}
