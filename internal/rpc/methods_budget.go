package rpc

import (
	"context"
	"encoding/json"
	"math"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// costBudget is the session.budget.set in force on a connection.
type costBudget struct {
	limits protocol.BudgetLimits
	meter  *engine.Meter // the connection's, for scope session
}

const budgetShape = `{max_tool_calls?: integer, max_actions?: integer, max_duration_ms?: integer, max_cost_usd?: number, scope?: "proposal" | "session"}`

// sessionBudgetSet replaces the connection's cost budget; params with no
// limit remove it. A session-scoped budget counts from now.
func (c *conn) sessionBudgetSet(_ context.Context, params *json.RawMessage) (any, error) {
	var p protocol.BudgetLimits
	if err := decodeKnownParams(params, &p, budgetShape); err != nil {
		return nil, err
	}
	switch p.Scope {
	case "":
		p.Scope = protocol.BudgetPerProposal
	case protocol.BudgetPerProposal, protocol.BudgetPerSession:
	default:
		return nil, invalidParams("param 'scope' must be \"proposal\" or \"session\", got %q", p.Scope)
	}
	for name, v := range map[string]*int{"max_tool_calls": p.MaxToolCalls, "max_actions": p.MaxActions} {
		if v != nil && *v < 0 {
			return nil, invalidParams("param '%s' must be a non-negative integer, got %d", name, *v)
		}
	}
	if p.MaxCostUSD != nil && (*p.MaxCostUSD < 0 || math.IsNaN(*p.MaxCostUSD) || math.IsInf(*p.MaxCostUSD, 0)) {
		return nil, invalidParams("param 'max_cost_usd' must be a non-negative number, got %g", *p.MaxCostUSD)
	}
	if !p.Any() {
		c.budget.Store(nil)
		return protocol.BudgetReport{Limits: p}, nil
	}
	b := &costBudget{limits: p}
	if p.Scope == protocol.BudgetPerSession {
		b.meter = engine.NewMeter(p)
	}
	c.budget.Store(b)
	return engine.NewMeter(p).Report(), nil
}

// budgetMeter is the meter one proposal.submit charges: the connection's
// for scope session, a fresh one for scope proposal, nil without a budget.
func (c *conn) budgetMeter() *engine.Meter {
	b := c.budget.Load()
	switch {
	case b == nil:
		return nil
	case b.meter != nil:
		return b.meter
	}
	return engine.NewMeter(b.limits)
}
