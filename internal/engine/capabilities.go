package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parslee-ai/car-server/protocol"
)

// Capabilities restrict what one connection's proposals may touch: the
// tools they call, the state keys they read or write, and how many actions
// one proposal holds. A nil list is no restriction; an empty one allows
// nothing. Patterns are exact names or a prefix ending in '*'.
type Capabilities struct {
	Tools      []string `json:"tools"`
	StateKeys  []string `json:"state_keys"`
	MaxActions int      `json:"max_actions"` // 0: the daemon's max_actions
}

// ErrWidening is a capability change that would allow more than the set in
// force.
var ErrWidening = errors.New("capabilities can only be narrowed")

// Capabilities returns the set in force; nil when none was set.
func (s *Session) Capabilities() *Capabilities { return s.caps.Load() }

// SetCapabilities replaces the set in force with c. A field c leaves nil
// (or 0) keeps what is in force. Unless widen is true, c must be within the
// set in force: every pattern it names covered by one already allowed, and
// no larger max_actions.
func (s *Session) SetCapabilities(c Capabilities, widen bool) (Capabilities, error) {
	for _, list := range [][]string{c.Tools, c.StateKeys} {
		for _, p := range list {
			if p == "" || strings.Count(p, "*") > 1 || (strings.Contains(p, "*") && !strings.HasSuffix(p, "*")) {
				return Capabilities{}, fmt.Errorf("capability pattern '%s' must be a name or a prefix ending in '*'", p)
			}
		}
	}
	if c.MaxActions < 0 {
		return Capabilities{}, errors.New("max_actions must be positive")
	}
	s.capsMu.Lock()
	defer s.capsMu.Unlock()
	cur := Capabilities{}
	if p := s.caps.Load(); p != nil {
		cur = *p
	}
	next := cur
	var wider []string
	if c.Tools != nil {
		wider = append(wider, uncovered("tool", cur.Tools, c.Tools)...)
		next.Tools = slices.Clone(c.Tools)
	}
	if c.StateKeys != nil {
		wider = append(wider, uncovered("state key", cur.StateKeys, c.StateKeys)...)
		next.StateKeys = slices.Clone(c.StateKeys)
	}
	if c.MaxActions > 0 {
		if cur.MaxActions > 0 && c.MaxActions > cur.MaxActions {
			wider = append(wider, fmt.Sprintf("max_actions %d (in force: %d)", c.MaxActions, cur.MaxActions))
		}
		next.MaxActions = c.MaxActions
	}
	if len(wider) > 0 && !widen {
		return cur, fmt.Errorf("%w: %s would widen the set in force", ErrWidening, strings.Join(wider, ", "))
	}
	s.caps.Store(&next)
	return next, nil
}

// uncovered names the patterns of next that the set in force does not
// already allow; a nil set in force allows everything.
func uncovered(what string, cur, next []string) []string {
	if cur == nil {
		return nil
	}
	var out []string
	for _, p := range next {
		if !slices.ContainsFunc(cur, func(c string) bool { return covers(c, p) }) {
			out = append(out, fmt.Sprintf("%s '%s'", what, p))
		}
	}
	return out
}

// covers reports whether pattern c allows everything pattern p allows.
func covers(c, p string) bool {
	if prefix, ok := strings.CutSuffix(c, "*"); ok {
		return strings.HasPrefix(strings.TrimSuffix(p, "*"), prefix)
	}
	return c == p
}

// allows reports whether a name is within a list of patterns (nil: any).
func allows(patterns []string, name string) bool {
	if patterns == nil {
		return true
	}
	return slices.ContainsFunc(patterns, func(p string) bool {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			return strings.HasPrefix(name, prefix)
		}
		return p == name
	})
}

// AllowsKey is the state-key check for the methods that touch state
// directly (state.get, state.set, …).
func (c *Capabilities) AllowsKey(key string) error {
	if c == nil || allows(c.StateKeys, key) {
		return nil
	}
	return fmt.Errorf("state key '%s' is outside this connection's capabilities (state_keys %s; see session.capabilities.get)", key, quoteList(c.StateKeys))
}

// actionProblem says why a is outside c, or "". At admission (pending)
// keys still holding a $id.output reference are left for the check of the
// resolved action, which skips nothing.
func (c *Capabilities) actionProblem(a *protocol.Action, pending bool) string {
	if a.Type == protocol.ActionToolCall && !allows(c.Tools, a.Tool) {
		return fmt.Sprintf("action '%s': tool '%s' is outside this connection's capabilities (tools %s)", a.ID, a.Tool, quoteList(c.Tools))
	}
	// A tool that runs another by name is held to the same set.
	if t, ok := a.Parameters["tool"].(string); ok && a.Type == protocol.ActionToolCall && !(pending && refPattern.MatchString(t)) && !allows(c.Tools, t) {
		return fmt.Sprintf("action '%s': its parameter 'tool' names '%s', outside this connection's capabilities (tools %s)", a.ID, t, quoteList(c.Tools))
	}
	for _, k := range touchedKeys(a) {
		if !(pending && refPattern.MatchString(k)) && !allows(c.StateKeys, k) {
			return fmt.Sprintf("action '%s': state key '%s' is outside this connection's capabilities (state_keys %s)", a.ID, k, quoteList(c.StateKeys))
		}
	}
	return ""
}

// touchedKeys are the state keys an action reads or writes.
func touchedKeys(a *protocol.Action) []string {
	keys := append(writtenKeys(a), readKeys(a)...)
	for _, pc := range a.Preconditions {
		keys = append(keys, pc.Key)
	}
	if a.Type == protocol.ActionAssertion {
		if k, ok := a.Parameters["key"].(string); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// readKeys are the state keys an action reads into its output or waits on.
func readKeys(a *protocol.Action) []string {
	keys := slices.Clone(a.StateDependencies)
	if a.Type != protocol.ActionStateRead {
		return keys
	}
	if k, ok := a.Parameters["key"].(string); ok {
		keys = append(keys, k)
	}
	list, _ := a.Parameters["keys"].([]any)
	for _, k := range list {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	return keys
}

func quoteList(list []string) string {
	if len(list) == 0 {
		return "[] (none)"
	}
	return "[" + strings.Join(list, ", ") + "]"
}

// capabilityGate blocks a proposal that reaches outside the submitting
// connection's capability set.
type capabilityGate struct{}

func (capabilityGate) Name() string { return "capability" }

func (capabilityGate) Admit(_ context.Context, sub *Submission) error {
	c := sub.Session.Capabilities()
	if c == nil {
		return nil
	}
	if c.MaxActions > 0 && len(sub.Proposal.Actions) > c.MaxActions {
		return fmt.Errorf("capability gate blocked the proposal: it has %d actions; this connection's capabilities allow %d (max_actions)", len(sub.Proposal.Actions), c.MaxActions)
	}
	var problems []string
	for i := range sub.Proposal.Actions {
		if p := c.actionProblem(&sub.Proposal.Actions[i], true); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("capability gate blocked the proposal: %s", strings.Join(problems, "; "))
	}
	return nil
}

// capabilityCheck holds an action to the set again just before it runs,
// with its references resolved: a reference must not carry a key or a tool
// name the set does not allow.
type capabilityCheck struct{}

func (capabilityCheck) Name() string { return "capability" }

func (capabilityCheck) Check(_ context.Context, sub *Submission, a *protocol.Action) error {
	c := sub.Session.Capabilities()
	if c == nil {
		return nil
	}
	if p := c.actionProblem(a, false); p != "" {
		return errors.New(p)
	}
	return nil
}
