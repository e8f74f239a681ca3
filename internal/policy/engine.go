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
type StateReader interface {
	// State returns the value at key and whether it is set.
	State(key string) (any, bool)
}

// StateFunc is a function as a StateReader.
type StateFunc func(key string) (any, bool)

// State implements StateReader.
func (f StateFunc) State(key string) (any, bool) { return f(key) }

// Rule decides on one action. It returns a reason when it denies it.
type Rule interface {
	Evaluate(a *protocol.Action, state StateReader, now time.Time) (reason string, denied bool)
}

// ToolScoped is a Rule that can only deny calls to one tool. The engine
// indexes such rules by tool, so an action is only evaluated against the
// rules that could deny it.
type ToolScoped interface {
	ScopeTool() string
}

// Wholesale is a Rule that denies every call of the tools it names,
// whatever their parameters and the state: a tool it denies cannot run at
// all, so it is not advertised to a client that could only be refused.
type Wholesale interface {
	// DeniesTool reports whether the rule denies every call of tool, which
	// owner (a connector's slug, "" for a client's tool) provides.
	DeniesTool(tool, owner string) bool
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
	byTool   map[string][]int // indexes of ToolScoped policies, by tool; nil while there are none
	general  []int            // indexes of every other policy
	quorums  []int            // indexes of the Quorum rules, which deny nothing and are read by Quorum
	now      func() time.Time
}

// NewEngine returns an engine holding ps, in order.
func NewEngine(ps ...Policy) *Engine {
	e := &Engine{policies: ps, now: time.Now}
	e.reindex()
	return e
}

// reindex rebuilds the tool index; callers hold mu (or own e).
func (e *Engine) reindex() {
	e.byTool = nil
	e.general = e.general[:0]
	e.quorums = e.quorums[:0]
	for i, p := range e.policies {
		e.index(p, i)
	}
}

// index files policy i under its tool, or with the general ones; callers
// hold mu (or own e). The tool index is made with its first entry: every
// connection has an engine, and most hold no policy.
func (e *Engine) index(p Policy, i int) {
	if _, ok := p.Rule.(Quorum); ok {
		e.quorums = append(e.quorums, i)
		return
	}
	ts, ok := p.Rule.(ToolScoped)
	if !ok {
		e.general = append(e.general, i)
		return
	}
	if e.byTool == nil {
		e.byTool = make(map[string][]int)
	}
	tool := ts.ScopeTool()
	e.byTool[tool] = append(e.byTool[tool], i)
}

// Add appends a policy. Names need not be unique.
func (e *Engine) Add(p Policy) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policies = append(e.policies, p)
	e.index(p, len(e.policies)-1)
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
	e.reindex()
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

// Evaluate runs every policy that applies to a and returns every violation,
// in registration order.
func (e *Engine) Evaluate(a *protocol.Action, state StateReader) []Violation {
	if e == nil {
		return nil
	}
	now := e.now()
	e.mu.RLock()
	defer e.mu.RUnlock()
	var scoped []int
	if a.Type == protocol.ActionToolCall {
		scoped = e.byTool[a.Tool]
	}
	var out []Violation
	// Merge the two sorted index lists to keep registration order.
	g, s := 0, 0
	for g < len(e.general) || s < len(scoped) {
		var i int
		if s >= len(scoped) || (g < len(e.general) && e.general[g] < scoped[s]) {
			i = e.general[g]
			g++
		} else {
			i = scoped[s]
			s++
		}
		p := &e.policies[i]
		if reason, denied := p.Rule.Evaluate(a, state, now); denied {
			out = append(out, Violation{PolicyName: p.Name, ActionID: a.ID, Reason: reason})
		}
	}
	return out
}

// DeniesWholesale returns the first policy whose rule denies every call of
// tool (Wholesale), and whether there is one.
func (e *Engine) DeniesWholesale(tool, owner string) (Policy, bool) {
	if e == nil {
		return Policy{}, false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, p := range e.policies {
		if w, ok := p.Rule.(Wholesale); ok && w.DeniesTool(tool, owner) {
			return p, true
		}
	}
	return Policy{}, false
}
