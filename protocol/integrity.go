package protocol

import "encoding/json"

// The integrity gates: the intent gate and its taint ledger, transactional
// conflict checks and tool receipts. Upstream has them in-process only; the
// wire names are this project's.
const (
	MethodSessionIntentSet   = "session.intent.set"   // narrows the operator's intent for this connection
	MethodSessionIntentGet   = "session.intent.get"   // the intents in force and the capability names
	MethodSessionIntentClear = "session.intent.clear" // the host role only: an agent cannot shed its own intent
	MethodTaintList          = "taint.list"
	MethodTaintClear         = "taint.clear" // the host role only, recorded

	MethodSessionTransactionCheckSet = "session.transaction_check.set"

	MethodReceiptsVerify = "receipts.verify"
)

// WorkIntent is what work is for: the tools it may call, the tools and
// capabilities it must never use, and the tools whose output is untrusted.
// Patterns are tool names or a prefix ending in '*'. A nil allowed_tools is
// every tool; allowed_capabilities is the operator's only (intent.json).
type WorkIntent struct {
	Intent                string   `json:"intent"`
	AllowedTools          []string `json:"allowed_tools" jsonschema:"nullable"`
	ForbiddenTools        []string `json:"forbidden_tools,omitempty"`
	ForbiddenCapabilities []string `json:"forbidden_capabilities,omitempty"`
	AllowedCapabilities   []string `json:"allowed_capabilities" jsonschema:"nullable"`
	UntrustedTools        []string `json:"untrusted_tools,omitempty"`
}

// IntentSetParams are the params of session.intent.set.
type IntentSetParams struct {
	Intent                string   `json:"intent"`
	AllowedTools          []string `json:"allowed_tools,omitempty"`
	ForbiddenTools        []string `json:"forbidden_tools,omitempty"`
	ForbiddenCapabilities []string `json:"forbidden_capabilities,omitempty"`
	UntrustedTools        []string `json:"untrusted_tools,omitempty"`
}

// IntentState is the reply to session.intent.get, .set and .clear: the
// operator's intent (null: none), the connection's own (null: none) and
// the capability names this daemon knows.
type IntentState struct {
	Operator     *WorkIntent `json:"operator" jsonschema:"nullable"`
	Session      *WorkIntent `json:"session" jsonschema:"nullable"`
	Capabilities []string    `json:"capabilities"`
}

// TaintListParams are the params of taint.list: keys to ask about (omitted:
// every tainted key of the tenant).
type TaintListParams struct {
	Keys     []string `json:"keys,omitempty"`
	TenantID string   `json:"tenant_id,omitempty"`
}

// TaintClearParams are the params of taint.clear.
type TaintClearParams struct {
	Keys     []string `json:"keys"`
	TenantID string   `json:"tenant_id,omitempty"`
}

// TaintEntry is one tainted state key: the action whose untrusted data
// reached it, and when.
type TaintEntry struct {
	Key        string `json:"key"`
	ProposalID string `json:"proposal_id"`
	ActionID   string `json:"action_id"`
	Tool       string `json:"tool,omitempty"`
	Origin     string `json:"origin"` // where the taint came from: the untrusted tool, or the key it was read from
	At         string `json:"at"`
}

// TaintListResult is the reply to taint.list, sorted by key.
type TaintListResult struct {
	Tainted []TaintEntry `json:"tainted"`
}

// TaintClearResult is the reply to taint.clear: the keys whose taint was
// cleared (a key that was not tainted is left out).
type TaintClearResult struct {
	Cleared []string `json:"cleared"`
}

// Transaction check modes.
const (
	TransactionCheckOff    = "off"
	TransactionCheckWarn   = "warn"
	TransactionCheckStrict = "strict"
)

// TransactionCheckParams are the params of session.transaction_check.set
// and its reply.
type TransactionCheckParams struct {
	Mode string `json:"mode" jsonschema:"enum=off,enum=warn,enum=strict"`
}

// Transaction conflict kinds.
const (
	ConflictWriteWrite       = "write_write"
	ConflictReadWrite        = "read_write"
	ConflictStaleRead        = "stale_read"
	ConflictBeliefDivergence = "belief_divergence"
)

// Assumption is one entry of an action's assumptions: a state key the
// action relies on, with the value it expects there and/or the version it
// read it at (state.get {key, with_version: true}).
type Assumption struct {
	Key           string          `json:"key"`
	ExpectedValue json.RawMessage `json:"expected_value,omitempty"`
	ReadVersion   *uint64         `json:"read_version,omitempty"`
}

// StateVersioned is the reply to state.get {key, with_version: true}: the
// value and the version of the write that stored it (0: no such key).
type StateVersioned struct {
	Value   json.RawMessage `json:"value"`
	Version uint64          `json:"version"`
}

// ToolClaim is one claim a model made about a tool call: the tool, and
// optionally which action, how many results it returned, that it found
// nothing, or a string its output contained.
type ToolClaim struct {
	Tool           string `json:"tool"`
	ActionID       string `json:"action_id,omitempty"`
	ResultCount    *int   `json:"result_count,omitempty"`
	FoundNothing   bool   `json:"found_nothing,omitempty"`
	OutputContains string `json:"output_contains,omitempty"`
}

// ReceiptsVerifyParams are the params of receipts.verify.
type ReceiptsVerifyParams struct {
	Claims     []ToolClaim `json:"claims"`
	ProposalID string      `json:"proposal_id,omitempty"`
}

// Receipt verdicts.
const (
	VerdictGrounded                = "grounded"
	VerdictFabricatedToolReference = "fabricated_tool_reference"
	VerdictMisstatedResultCount    = "misstated_result_count"
	VerdictFalseNegative           = "false_negative"
	VerdictUngroundable            = "ungroundable"
)

// ClaimVerdict is the judgement of one claim.
type ClaimVerdict struct {
	Claim   ToolClaim `json:"claim"`
	Verdict string    `json:"verdict" jsonschema:"enum=grounded,enum=fabricated_tool_reference,enum=misstated_result_count,enum=false_negative,enum=ungroundable"`
	Detail  string    `json:"detail"`
}

// ReceiptReport is the reply to receipts.verify: grounded when every claim
// is; ungroundable lists the claims the log window cannot judge.
type ReceiptReport struct {
	Grounded     bool           `json:"grounded"`
	Claims       []ClaimVerdict `json:"claims"`
	Ungroundable []ToolClaim    `json:"ungroundable"`
}

// TransactionConflict is one finding of the transaction check: the two
// actions (the other may be in a proposal in flight on another connection:
// "proposal P action A"), the key, and the kind.
type TransactionConflict struct {
	Kind     string `json:"kind" jsonschema:"enum=write_write,enum=read_write,enum=stale_read,enum=belief_divergence"`
	Key      string `json:"key"`
	ActionID string `json:"action_id"`
	Other    string `json:"other,omitempty"`
	Detail   string `json:"detail"`
}

// Intent verdicts, as permission.evaluate reports them.
const (
	IntentAllowed    = "allowed"
	IntentForbidden  = "forbidden"
	IntentInfluenced = "influenced" // out of intent and influenced by untrusted data: rejected
	IntentDrift      = "drift"      // out of intent, not influenced: escalated to approval
)

// IntentDecision is the intent gate's verdict on one action.
type IntentDecision struct {
	ActionID    string `json:"action_id"`
	Verdict     string `json:"verdict" jsonschema:"enum=allowed,enum=forbidden,enum=influenced,enum=drift"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"` // drift: what to approve
}
