package rpc

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// Without session_id a policy binds to the calling connection. The reply
// says scope "global", as upstream does; here that means "this connection",
// never the whole daemon: one connection's rules never touch another's.

const policyDefinitionShape = "PolicyDefinition {name, rule: deny_tool|deny_connector|deny_tool_param|require_state, target?, key?, pattern?, value?, session_id?}"

// policyScope is the reply's scope: "global" or {session_id}.
func policyScope(sessionID string) protocol.PolicyScope {
	if sessionID == "" {
		return protocol.PolicyScopeGlobal
	}
	return protocol.PolicySessionScope{SessionID: sessionID}
}

// policyLayer returns the rules a session_id names: the connection's own
// when empty, else one of its sub-sessions.
func (c *conn) policyLayer(sessionID string) (*policy.Engine, error) {
	if sessionID == "" {
		return c.sess.Policies, nil
	}
	e, ok := c.sess.PolicySession(sessionID)
	if !ok {
		return nil, invalidParams("session_id '%s' is not an open policy session of this connection; open one with session.policy.open", sessionID)
	}
	return e, nil
}

// registerPolicy adds one client-defined policy to its layer.
func (c *conn) registerPolicy(d protocol.PolicyDefinition) error {
	layer, err := c.policyLayer(d.SessionID)
	if err != nil {
		return err
	}
	p, err := policy.FromDefinition(d)
	if err != nil {
		return invalidParams("%v", err)
	}
	layer.Add(p)
	return nil
}

func (c *conn) policyRegister(_ context.Context, params *json.RawMessage) (any, error) {
	var d protocol.PolicyDefinition
	if err := decodeParams(params, &d, policyDefinitionShape); err != nil {
		return nil, err
	}
	if err := c.registerPolicy(d); err != nil {
		return nil, err
	}
	// name and registered (the name) cover both of upstream's reply shapes.
	return protocol.PolicyRegisterResult{Name: d.Name, Registered: d.Name, Scope: policyScope(d.SessionID)}, nil
}

func (c *conn) policyUnregister(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.PolicyUnregisterParams
	const shape = "{name: string, session_id?: string}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("name", p.Name, shape); err != nil {
		return nil, err
	}
	layer, err := c.policyLayer(p.SessionID)
	if err != nil {
		return nil, err
	}
	return protocol.PolicyUnregisterResult{Unregistered: p.Name, Removed: layer.Remove(p.Name), Scope: policyScope(p.SessionID)}, nil
}

// policyList lists what is in force for the scope: the operator's rules, the
// connection's, and the sub-session's when session_id is given, each marked
// with its layer, in registration order.
func (c *conn) policyList(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.PolicyListParams
	if err := optionalParams(params, &p, "{session_id?: string}"); err != nil {
		return nil, err
	}
	out := []protocol.PolicyInfo{}
	add := func(layer string, e *policy.Engine) {
		for _, pol := range e.List() {
			out = append(out, protocol.PolicyInfo{Name: pol.Name, Description: pol.Description, Layer: layer})
		}
	}
	add(protocol.LayerOperator, c.srv.rt.OperatorPolicies())
	add(protocol.LayerConnection, c.sess.Policies)
	if p.SessionID != "" {
		e, err := c.policyLayer(p.SessionID)
		if err != nil {
			return nil, err
		}
		add(protocol.LayerSession, e)
	}
	return protocol.PolicyListResult{Policies: out, Scope: policyScope(p.SessionID)}, nil
}

func (c *conn) sessionPolicyOpen(context.Context, *json.RawMessage) (any, error) {
	return protocol.SessionPolicyOpenResult{SessionID: c.sess.OpenPolicySession()}, nil
}

func (c *conn) sessionPolicyClose(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.SessionPolicyCloseParams
	const shape = "{session_id: string}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("session_id", p.SessionID, shape); err != nil {
		return nil, err
	}
	return protocol.SessionPolicyCloseResult{Closed: c.sess.ClosePolicySession(p.SessionID)}, nil
}
