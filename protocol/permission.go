package protocol

import "encoding/json"

// PermissionProposalParams are the params of permission.classify,
// permission.evaluate and permission.pending: one proposal, which the
// daemon decodes as proposal.submit would take it.
type PermissionProposalParams struct {
	Proposal Raw[ActionProposal] `json:"proposal"`
	// Skill is upstream's narrowing of the decision to a skill's ceiling.
	// This daemon has none and refuses the member rather than answer a
	// looser decision than the caller asked for; it is not documented.
	Skill json.RawMessage `json:"skill,omitempty" jsonschema:"-"`
}

// PermissionDecision is one action's row in permission.evaluate and
// permission.pending.
type PermissionDecision struct {
	ActionID      string        `json:"action_id"`
	Tool          string        `json:"tool,omitempty"`
	Fingerprint   string        `json:"fingerprint"`
	Decision      string        `json:"decision"` // allow, needs_approval or deny
	Required      string        `json:"required"` // the tier the action needs
	Reversibility Reversibility `json:"reversibility"`
	Granted       string        `json:"granted"` // the tier it was decided at
	Reason        string        `json:"reason,omitempty"`
	Signals       []string      `json:"signals,omitempty"` // the classifier's reasons for required
}
