package connectors

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// classify is the classification a tool's MCP annotations give, and whether
// it is idempotent by default. Annotations are untrusted hints, so only a
// hint that lowers the risk is read, and the absence of one is full access:
//   - readOnlyHint true: read_only;
//   - destructiveHint false: sandbox_edit;
//   - anything else, no annotations included: full_access;
//   - idempotentHint true: idempotent.
//
// Signals name the annotation that decided, for permission.classify.
func classify(a *mcp.ToolAnnotations) (policy.Classification, bool) {
	switch {
	case a != nil && a.ReadOnlyHint:
		return policy.Classification{Tier: policy.ReadOnly, Reversibility: protocol.Reversible, Signals: []string{"mcp annotation readOnlyHint: true"}}, a.IdempotentHint
	case a != nil && a.DestructiveHint != nil && !*a.DestructiveHint:
		return policy.Classification{Tier: policy.SandboxEdit, Reversibility: protocol.Compensable, Signals: []string{"mcp annotation destructiveHint: false"}}, a.IdempotentHint
	case a == nil:
		return policy.Classification{Tier: policy.FullAccess, Reversibility: protocol.Irreversible, Signals: []string{"mcp tool without annotations"}}, false
	}
	return policy.Classification{Tier: policy.FullAccess, Reversibility: protocol.Irreversible, Signals: []string{"mcp annotations: neither readOnlyHint true nor destructiveHint false"}}, a.IdempotentHint
}

// operatorClass is the classification connectors.toml's classify gives a
// tool, whatever its annotations say.
func operatorClass(t policy.Tier) policy.Classification {
	rev := protocol.Irreversible
	switch t {
	case policy.ReadOnly:
		rev = protocol.Reversible
	case policy.SandboxEdit:
		rev = protocol.Compensable
	}
	return policy.Classification{Tier: t, Reversibility: rev, Signals: []string{"operator classify in connectors.toml: " + t.String()}}
}
