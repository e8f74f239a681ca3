package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// The submission's RuntimeScope as rules see it. A parameter name of
// ScopePrefix ("scope.callerId", "scope.claims.<k>") reads the scope
// instead of the action's parameters, in deny_tool_param,
// allow_tool_param and deny_tool_param_matching alike. The scope comes from
// the submitter: a claim an agent asserts about itself can make a rule
// deny, never make it allow, so require_claim and allow_tool_param count
// only what a trusted submitter (not an agent) asserted.

// ScopePrefix starts a parameter name that reads the scope.
const ScopePrefix = "scope."

// ScopeReader is what the engine hands rules besides state: the scope's
// caller and claims. trusted says the submitter is not an agent.
type ScopeReader interface {
	// Scope returns the scope field at path ("callerId" or
	// "claims.<k>"), whether it is present, and whether it is trusted.
	Scope(path string) (v any, ok, trusted bool)
}

// param is the value a rule reads under name: the action's parameter, or,
// under ScopePrefix, the scope's field (absent when untrusted and
// needTrusted, or when the reader has no scope).
func param(a *protocol.Action, state StateReader, name string, needTrusted bool) (any, bool) {
	path, isScope := strings.CutPrefix(name, ScopePrefix)
	if !isScope {
		v, ok := a.Parameters[name]
		return v, ok
	}
	sr, ok := state.(ScopeReader)
	if !ok {
		return nil, false
	}
	v, present, trusted := sr.Scope(path)
	if !present || (needTrusted && !trusted) {
		return nil, false
	}
	return v, true
}

// RequireClaim denies an action (of Tool; every action when Tool is "")
// unless a trusted submitter's scope carries claim Claim, equal to Value as
// JSON when HasValue.
type RequireClaim struct {
	Claim    string
	Tool     string
	Value    any
	HasValue bool
}

// Evaluate implements Rule.
func (r RequireClaim) Evaluate(a *protocol.Action, state StateReader, _ time.Time) (string, bool) {
	if r.Tool != "" && (a.Type != protocol.ActionToolCall || a.Tool != r.Tool) {
		return "", false
	}
	v, ok := param(a, state, ScopePrefix+"claims."+r.Claim, true)
	if ok && (!r.HasValue || jsonvalue.Equal(v, r.Value)) {
		return "", false
	}
	want := fmt.Sprintf("claim '%s'", r.Claim)
	if r.HasValue {
		want = fmt.Sprintf("claim '%s' = %s", r.Claim, jsonvalue.Canonical(r.Value))
	}
	return fmt.Sprintf("requires scope %s from a trusted submitter (an agent's own claims do not count)", want), true
}
