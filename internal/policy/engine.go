package policy

import (
	"sync"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// Violation is one rule that denies one action.
type Violation struct {
	PolicyName string `json:"policy_name"`
	ActionID   string `json:"action_id"`
	Reason     string `json:"reason"`
}

// StateReader gives rules read access to the state the action runs against.
type StateReader func(key string) (any, bool)

// Rule decides on one action. It returns a reason when it denies it.
type Rule interface {
	Evaluate(a *protocol.Action, state StateReader, now time.Time) (reason string, denied bool)
}

// Policy is a named rule with a human description.
type Policy struct {
	Name        string
	Description string
	Rule        Rule
}

// Engine holds an ordered set of policies. It is safe for concurrent use.
type Engine struct {
	mu       sync.RWMutex
	policies []Policy
	now      func() time.Time
}

// NewEngine returns an engine holding ps, in order.
func NewEngine(ps ...Policy) *Engine {
	return &Engine{policies: ps, now: time.Now}
}

// Add appends a policy. Names need not be unique.
func (e *Engine) Add(p Policy) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policies = append(e.policies, p)
}

// Remove drops every policy named name and returns how many it dropped.
func (e *Engine) Remove(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept := e.policies[:0:0]
	for _, p := range e.policies {
		if p.Name != name {
			kept = append(kept, p)
		}
	}
	removed := len(e.policies) - len(kept)
	e.policies = kept
	return removed
}

// List returns the policies in registration order.
func (e *Engine) List() []Policy {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return append([]Policy(nil), e.policies...)
}

// Len is the number of policies.
func (e *Engine) Len() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.policies)
}

// Evaluate runs every policy on a and returns every violation.
func (e *Engine) Evaluate(a *protocol.Action, state StateReader) []Violation {
	if e == nil {
		return nil
	}
	now := e.now()
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []Violation
	for i := range e.policies {
		p := &e.policies[i]
		if reason, denied := p.Rule.Evaluate(a, state, now); denied {
			out = append(out, Violation{PolicyName: p.Name, ActionID: a.ID, Reason: reason})
		}
	}
	return out
}
