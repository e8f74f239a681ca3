package multi

import (
	"fmt"
	"sync"

	"github.com/parslee-ai/car-server/protocol"
)

// BudgetLimits bound a coordination; Spend is what it used.
type (
	BudgetLimits = protocol.MultiBudget
	Spend        = protocol.MultiSpend
)

// budget sums what agents report and refuses new agents once a limit is
// crossed. max_agents is a hard cap: it is checked when an agent starts.
type budget struct {
	limits BudgetLimits
	mu     sync.Mutex
	spend  Spend
}

// admit reserves an agent start, or says why it is refused.
func (b *budget) admit() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.limits
	var why string
	switch {
	case l.MaxAgents != nil && b.spend.Agents >= *l.MaxAgents:
		why = fmt.Sprintf("max_agents (%d) reached", *l.MaxAgents)
	case l.MaxInputTokens != nil && b.spend.InputTokens >= *l.MaxInputTokens:
		why = fmt.Sprintf("max_input_tokens (%d) reached: %d spent", *l.MaxInputTokens, b.spend.InputTokens)
	case l.MaxOutputTokens != nil && b.spend.OutputTokens >= *l.MaxOutputTokens:
		why = fmt.Sprintf("max_output_tokens (%d) reached: %d spent", *l.MaxOutputTokens, b.spend.OutputTokens)
	case l.MaxTotalTokens != nil && b.spend.InputTokens+b.spend.OutputTokens >= *l.MaxTotalTokens:
		why = fmt.Sprintf("max_total_tokens (%d) reached: %d spent", *l.MaxTotalTokens, b.spend.InputTokens+b.spend.OutputTokens)
	case l.MaxCostUSD != nil && b.spend.CostUSD >= *l.MaxCostUSD:
		why = fmt.Sprintf("max_cost_usd (%g) reached: %g spent", *l.MaxCostUSD, b.spend.CostUSD)
	}
	if why != "" {
		b.spend.Refused++
		return fmt.Errorf("budget: %s; agent not started", why)
	}
	b.spend.Agents++
	return nil
}

func (b *budget) record(o AgentOutput) {
	if o.Tokens == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spend.InputTokens += o.Tokens.InputTokens
	b.spend.OutputTokens += o.Tokens.OutputTokens
	b.spend.CostUSD += o.Tokens.CostUSD
}

func (b *budget) snapshot() Spend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spend
}
