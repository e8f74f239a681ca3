package protocol

// MethodSessionBudgetSet sets the connection's cost budget.
const MethodSessionBudgetSet = "session.budget.set"

// Budget scopes.
const (
	BudgetPerProposal = "proposal" // each proposal.submit, its replans included
	BudgetPerSession  = "session"  // everything the connection submits from session.budget.set on
)

// BudgetLimits are the params of session.budget.set; unset limits are
// unbounded, and no limit at all removes the budget.
type BudgetLimits struct {
	MaxToolCalls  *int     `json:"max_tool_calls,omitempty"`
	MaxActions    *int     `json:"max_actions,omitempty"`
	MaxDurationMs *uint64  `json:"max_duration_ms,omitempty"`
	MaxCostUSD    *float64 `json:"max_cost_usd,omitempty"`
	Scope         string   `json:"scope,omitempty"` // proposal (the default) or session
}

// Any reports whether some limit is set.
func (l BudgetLimits) Any() bool {
	return l.MaxToolCalls != nil || l.MaxActions != nil || l.MaxDurationMs != nil || l.MaxCostUSD != nil
}

// BudgetSpend is what a budget's scope has spent. CostUSD sums the cost_usd
// that tool replies reported.
type BudgetSpend struct {
	ToolCalls  int     `json:"tool_calls"`
	Actions    int     `json:"actions"`
	DurationMs float64 `json:"duration_ms"`
	CostUSD    float64 `json:"cost_usd"`
}

// BudgetReport is the spend against a budget: the reply to
// session.budget.set and ProposalResult.cost.budget.
type BudgetReport struct {
	Limits   BudgetLimits `json:"limits"`
	Spent    BudgetSpend  `json:"spent"`
	Exceeded string       `json:"exceeded,omitempty"` // the limit that stopped dispatch, if one did
}
