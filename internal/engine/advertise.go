package engine

import (
	"encoding/json"
	"fmt"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// OfferedTool is a daemon tool as a client that can only call daemon tools
// (an MCP client) is offered it: its schema, where it comes from, and the
// tier a call with no parameters is classified at (the parameters can only
// raise it).
type OfferedTool struct {
	Schema      protocol.ToolSchema
	Tier        policy.Tier
	Annotations json.RawMessage // the provider's MCP annotations; nil: none
}

// OfferDaemonTools returns the daemon tools a session's principal may call,
// sorted by name: every one but those it could only be refused, because a
// policy of the operator or of the session denies every call of the tool
// (policy.Wholesale), or the agent's posture denies the tool's tier
// outright. A tool left out is one whose every call would be refused; a
// tool offered still passes every gate on each call.
func (rt *Runtime) OfferDaemonTools(s *Session, agent string) []OfferedTool {
	schemas := rt.opts.DaemonTools.List()
	out := make([]OfferedTool, 0, len(schemas))
	for _, sc := range schemas {
		tier := rt.Classify(&protocol.Action{Type: protocol.ActionToolCall, Tool: sc.Name}).Tier
		if _, denied := rt.RefusedOutright(s, agent, sc.Name, sc.Connector, tier); denied {
			continue
		}
		var ann json.RawMessage
		if t, ok := rt.opts.DaemonTools.Lookup(sc.Name); ok {
			ann = t.annotations
		}
		out = append(out, OfferedTool{Schema: sc, Tier: tier, Annotations: ann})
	}
	return out
}

// RefusedOutright says why every call of tool (which owner provides, at
// tier at least) by agent on s would be refused, if it would: a policy that
// denies the tool wholesale, or the agent's deny posture for the tier.
func (rt *Runtime) RefusedOutright(s *Session, agent, tool, owner string, tier policy.Tier) (string, bool) {
	for _, l := range []struct {
		name string
		e    *policy.Engine
	}{{protocol.LayerOperator, rt.OperatorPolicies()}, {protocol.LayerConnection, s.Policies}} {
		if p, ok := l.e.DeniesWholesale(tool, owner); ok {
			return fmt.Sprintf("denied by %s policy '%s'", l.name, p.Name), true
		}
	}
	if agent != "" && rt.opts.Postures != nil {
		if mode, _ := rt.opts.Postures.Resolve(agent, tier); mode == PostureDeny {
			return fmt.Sprintf("agent '%s' may not take %s actions (agent_permissions: deny)", agent, tier), true
		}
	}
	return "", false
}

// DaemonTool returns the named daemon tool, if one is enabled.
func (rt *Runtime) DaemonTool(name string) (*Tool, bool) { return rt.opts.DaemonTools.Lookup(name) }
