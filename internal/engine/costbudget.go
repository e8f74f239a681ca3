package engine

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// A cost budget is checked before each dispatch, never at admission:
// crossing it stops the run (what has not started ends skipped with
// "budget exceeded: <which>") and the run rolls back as on a failure.

// Meter counts what one budget scope has spent against its limits. A
// proposal-scoped Meter lives for one submission, its replans included; a
// session-scoped one for the connection. It is safe for concurrent use.
type Meter struct {
	limits protocol.BudgetLimits

	mu       sync.Mutex
	spent    protocol.BudgetSpend
	exceeded string // the first limit that stopped dispatch
}

// NewMeter starts a budget scope with nothing spent.
func NewMeter(limits protocol.BudgetLimits) *Meter {
	return &Meter{limits: limits}
}

// Report is the spend against the limits now.
func (m *Meter) Report() *protocol.BudgetReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &protocol.BudgetReport{Limits: m.limits, Spent: m.spent, Exceeded: m.exceeded}
}

// Exceeded is the limit that stopped dispatch in this scope, or "".
func (m *Meter) Exceeded() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exceeded
}

// errBudget marks the errors of a dispatch a budget stopped.
var errBudget = errors.New("budget exceeded")

// over names the first limit that one more action (and, for a tool call,
// one more call) would cross, for a run that has been executing for
// elapsed; "" when none. Called with m.mu held.
func (m *Meter) over(elapsed time.Duration, toolCall, newAction bool) string {
	l, s := m.limits, m.spent
	used := s.DurationMs + float64(elapsed.Microseconds())/1000
	switch {
	case toolCall && l.MaxToolCalls != nil && s.ToolCalls >= *l.MaxToolCalls:
		return fmt.Sprintf("max_tool_calls (%d allowed, %d made)", *l.MaxToolCalls, s.ToolCalls)
	case newAction && l.MaxActions != nil && s.Actions >= *l.MaxActions:
		return fmt.Sprintf("max_actions (%d allowed, %d started)", *l.MaxActions, s.Actions)
	case l.MaxCostUSD != nil && s.CostUSD >= *l.MaxCostUSD:
		return fmt.Sprintf("max_cost_usd (%g allowed, %g spent)", *l.MaxCostUSD, s.CostUSD)
	case l.MaxDurationMs != nil && used >= float64(*l.MaxDurationMs):
		return fmt.Sprintf("max_duration_ms (%d allowed, %.0f used)", *l.MaxDurationMs, used)
	}
	return ""
}

// charge counts one more action or tool call, or refuses it with the limit
// it would cross, naming the scope.
func (m *Meter) charge(elapsed time.Duration, toolCall, newAction bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if which := m.over(elapsed, toolCall, newAction); which != "" {
		if m.limits.Scope == protocol.BudgetPerSession {
			which += " for this connection (scope session)"
		}
		if m.exceeded == "" {
			m.exceeded = which
		}
		return fmt.Errorf("%w: %s", errBudget, which)
	}
	if newAction {
		m.spent.Actions++
	} else if toolCall {
		m.spent.ToolCalls++
	}
	return nil
}

// addCost adds what a tool reported it cost.
func (m *Meter) addCost(usd float64) {
	m.mu.Lock()
	m.spent.CostUSD += usd
	m.mu.Unlock()
}

// addDuration adds the execution time of a finished run.
func (m *Meter) addDuration(ms float64) {
	m.mu.Lock()
	m.spent.DurationMs += ms
	m.mu.Unlock()
}

// meterAction is the budget check just before action i runs: nil, or the
// outcome of an action the budget stops. It counts the action.
func (r *run) meterAction(i int) *outcome {
	m := r.sub.Budget
	if m == nil {
		return nil
	}
	toolCall := r.nodes[i].action.Type == protocol.ActionToolCall
	if err := m.charge(time.Since(r.start), toolCall, true); err != nil {
		r.stopForBudget(err)
		return &outcome{status: protocol.StatusSkipped, err: err, gate: "budget"}
	}
	return nil
}

// meterCall is the budget check before each dispatch of a tool call,
// retries included. It counts the call.
func (r *run) meterCall() error {
	m := r.sub.Budget
	if m == nil {
		return nil
	}
	if err := m.charge(time.Since(r.start), true, false); err != nil {
		r.stopForBudget(err)
		return err
	}
	return nil
}

// meterCost charges the cost a tool's reply reports: a non-negative number
// at cost_usd, or at tokens.cost_usd as an AgentOutput carries it.
func (r *run) meterCost(out any) {
	if r.sub.Budget == nil {
		return
	}
	m, ok := out.(map[string]any)
	if !ok {
		return
	}
	v, ok := m["cost_usd"]
	if tokens, isObj := m["tokens"].(map[string]any); !ok && isObj {
		v, ok = tokens["cost_usd"]
	}
	if !ok {
		return
	}
	if usd, ok := jsonvalue.ToFloat(v); ok && usd > 0 && !math.IsInf(usd, 0) {
		r.sub.Budget.addCost(usd)
	}
}

// stopForBudget remembers the first budget refusal of this run: settle
// stops the run with it.
func (r *run) stopForBudget(err error) {
	r.mu.Lock()
	if r.overBudget == nil {
		r.overBudget = err
	}
	r.mu.Unlock()
}

// budgetStop is the budget refusal that stops this run, or nil.
func (r *run) budgetStop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overBudget
}
