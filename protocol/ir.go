package protocol

import "encoding/json"

// ActionType is what an action does.
type ActionType string

// Action types of the IR.
const (
	ActionToolCall   ActionType = "tool_call"   // invoke a registered tool
	ActionStateWrite ActionType = "state_write" // set a state key, no tool
	ActionStateRead  ActionType = "state_read"  // read state keys into the output
	ActionAssertion  ActionType = "assertion"   // check a state predicate
)

// FailureBehavior is what happens when an action fails.
type FailureBehavior string

// Failure behaviours of the IR.
const (
	FailAbort FailureBehavior = "abort" // stop the proposal and roll state back (default)
	FailRetry FailureBehavior = "retry" // retry up to max_retries, then abort
	FailSkip  FailureBehavior = "skip"  // mark the action skipped and go on
)

// Reversibility is whether an action's effects can be undone.
type Reversibility string

// Reversibility values of the IR.
const (
	Reversible   Reversibility = "reversible"
	Compensable  Reversibility = "compensable"
	Irreversible Reversibility = "irreversible" // default
)

// Rank orders reversibility from most to least recoverable: reversible 0,
// compensable 1, irreversible 2. An unrecognised value ranks as the most
// severe, so a future label is over-reported rather than filtered out.
func (r Reversibility) Rank() int {
	switch r {
	case Reversible:
		return 0
	case Compensable:
		return 1
	case Irreversible:
		return 2
	}
	return 3
}

// ActionStatus is where an action ended up.
type ActionStatus string

// Statuses an ActionResult can carry.
const (
	StatusProposed  ActionStatus = "proposed"
	StatusValidated ActionStatus = "validated"
	StatusRejected  ActionStatus = "rejected"
	StatusExecuting ActionStatus = "executing"
	StatusSucceeded ActionStatus = "succeeded"
	StatusFailed    ActionStatus = "failed"
	StatusSkipped   ActionStatus = "skipped"
)

// ActionProposal is a batch of actions submitted in one round.
type ActionProposal struct {
	ID        string         `json:"id"`
	Source    string         `json:"source"`
	Timestamp string         `json:"timestamp"`
	Actions   []Action       `json:"actions"`
	Context   map[string]any `json:"context,omitempty"`
	// Strict refuses the proposal when it has a field the IR does not
	// know, instead of running it with the field ignored.
	Strict bool `json:"strict,omitempty"`
	// FieldWarnings name the fields of the proposal and its actions that
	// the IR does not know (a typo like depends_on): the decoder fills
	// them, the result carries them as warnings.
	FieldWarnings []string `json:"-"`
}

// Action is one unit of intent. Defaults (applied by DecodeProposal):
// parameters {}, max_retries 3, failure_behavior abort, reversibility
// irreversible, invocation_mode one_shot.
type Action struct {
	ID                string            `json:"id"`
	Type              ActionType        `json:"type"`
	Tool              string            `json:"tool,omitempty"`
	Parameters        map[string]any    `json:"parameters"`
	Preconditions     []Precondition    `json:"preconditions,omitempty"`
	ExpectedEffects   map[string]any    `json:"expected_effects,omitempty"`
	StateDependencies []string          `json:"state_dependencies,omitempty"`
	Dependencies      []string          `json:"dependencies,omitempty"`
	ReadSet           []string          `json:"read_set,omitempty"`
	WriteSet          []string          `json:"write_set,omitempty"`
	Assumptions       []json.RawMessage `json:"assumptions,omitempty"`
	InvocationMode    string            `json:"invocation_mode,omitempty"`
	Await             []string          `json:"await,omitempty"` // detached actions whose handle must end first (an extension)
	Reversibility     Reversibility     `json:"reversibility"`
	Compensation      json.RawMessage   `json:"compensation,omitempty"`
	Idempotent        bool              `json:"idempotent"`
	MaxRetries        uint32            `json:"max_retries"`
	// MaxRetriesUnset is true when the action did not carry max_retries:
	// MaxRetries then holds the IR's default 3 and the retry loop takes the
	// harness config's max_retries instead. Not on the wire: an action
	// re-decoded from its JSON carries its max_retries explicitly.
	MaxRetriesUnset bool            `json:"-"`
	FailureBehavior FailureBehavior `json:"failure_behavior"`
	TimeoutMs       *uint64         `json:"timeout_ms,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitempty"`
}

// Precondition is a state predicate that must hold before an action runs.
type Precondition struct {
	Key         string `json:"key"`
	Operator    string `json:"operator"`
	Value       any    `json:"value"`
	Description string `json:"description,omitempty"`
}

// ActionResult is the outcome of one action.
type ActionResult struct {
	ActionID     string         `json:"action_id"`
	Status       ActionStatus   `json:"status"`
	Output       any            `json:"output"`
	Error        *string        `json:"error" jsonschema:"nullable"`
	StateChanges map[string]any `json:"state_changes"`
	DurationMs   float64        `json:"duration_ms"`
	Timestamp    string         `json:"timestamp"`
	// CacheHit says the output came from a cache, not a tool call:
	// "idempotency" (the durable idempotency cache) or "result" (the tool's
	// cache_ttl_secs cache). Omitted when the tool ran.
	CacheHit string `json:"cache_hit,omitempty"`
}

// ErrorText is the action's error, or "" when it has none.
func (r ActionResult) ErrorText() string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// CostSummary is the accounting of one proposal. ActionsExecuted counts
// succeeded plus failed actions (both did real work).
type CostSummary struct {
	ToolCalls       int     `json:"tool_calls"`
	ActionsExecuted int     `json:"actions_executed"`
	ActionsRejected int     `json:"actions_rejected"`
	ActionsSkipped  int     `json:"actions_skipped"`
	TotalDurationMs float64 `json:"total_duration_ms"`
	Retries         int     `json:"retries"`
	// Budget is the spend against the connection's cost budget, when one
	// is set (session.budget.set).
	Budget *BudgetReport `json:"budget,omitempty"`
}

// ProposalResult is the reply to proposal.submit.
type ProposalResult struct {
	ProposalID string         `json:"proposal_id"`
	Results    []ActionResult `json:"results"`
	Cost       CostSummary    `json:"cost"`
	// Replans are the replacement proposals tried after this one failed
	// (replan.set_config); Results are then the last attempt's.
	Replans []Replan `json:"replans,omitempty"`
	// ReplanError says why the replan loop ended without a success: the
	// client gave up, did not answer, answered garbage, or max_replans ran out.
	ReplanError string `json:"replan_error,omitempty"`
	// Warnings say what the daemon ignored: fields of the proposal or its
	// actions that the IR does not know.
	Warnings []string `json:"warnings,omitempty"`
}

// Result returns the result of the action with id.
func (r *ProposalResult) Result(id string) (ActionResult, bool) {
	for _, ar := range r.Results {
		if ar.ActionID == id {
			return ar, true
		}
	}
	return ActionResult{}, false
}

// RuntimeScope attaches caller and tenant identity to one submission.
type RuntimeScope struct {
	CallerID string         `json:"callerId,omitempty"`
	TenantID string         `json:"tenantId,omitempty"`
	Claims   map[string]any `json:"claims,omitempty"`
}

// SubmitParams are the params of proposal.submit.
type SubmitParams struct {
	Proposal  Raw[ActionProposal] `json:"proposal"`
	SessionID string              `json:"session_id,omitempty"`
	Scope     *RuntimeScope       `json:"scope,omitempty"`
	// Meta, or the top-level Traceparent and Tracestate, name the client's
	// span (W3C Trace Context): with tracing on, the proposal's span is its
	// child. Any method's params may carry them.
	Meta        *TraceMeta `json:"_meta,omitempty"`
	Traceparent string     `json:"traceparent,omitempty"`
	Tracestate  string     `json:"tracestate,omitempty"`
}

// TraceMeta is W3C Trace Context in params._meta, as MCP carries it.
type TraceMeta struct {
	Traceparent string `json:"traceparent,omitempty"` // 00-<trace id>-<parent span id>-<flags>
	Tracestate  string `json:"tracestate,omitempty"`
}

// ToolExecuteParams are the params of the tools.execute callback.
type ToolExecuteParams struct {
	ActionID   string         `json:"action_id"`
	Tool       string         `json:"tool"`
	Parameters map[string]any `json:"parameters"`
	TimeoutMs  uint64         `json:"timeout_ms"`
	Attempt    int            `json:"attempt"`
	RequestID  string         `json:"request_id"`
	SessionID  string         `json:"session_id,omitempty"`
	AgentID    string         `json:"agent_id,omitempty"` // the agent the submitting connection is bound to
	// For a detached action: the mode, and the daemon-minted handle the
	// client's tools.stream.chunk notifications name.
	InvocationMode string `json:"invocation_mode,omitempty"`
	Handle         string `json:"handle,omitempty"`
	// Fence is the fencing token of an idempotent call: its idempotency
	// key and the epoch of the claim it runs under. A tool that writes to
	// another system may keep the highest epoch it saw per key and refuse a
	// lower one: that call comes from a daemon whose claim was taken over.
	Fence *Fence `json:"fence,omitempty"`
	// Meta carries the traceparent of the daemon's execute_tool span when
	// tracing is on, so that the client's tool span joins the trace.
	Meta *TraceMeta `json:"_meta,omitempty"`
}

// Fence is the fencing token of one idempotent call. Every claim of an
// idempotency key has an epoch of its own, higher than every earlier
// claim's of that key and never reused; a take-over of a claim whose holder
// stalled past its lease takes the next one.
type Fence struct {
	Key   string `json:"key"`
	Epoch uint64 `json:"epoch"`
}

// ToolCancelParams are the params of the tools.cancel notification.
type ToolCancelParams struct {
	RequestID string `json:"request_id"`
	ActionID  string `json:"action_id"`
	Reason    string `json:"reason"`
	Handle    string `json:"handle,omitempty"` // set when a detached invocation is cancelled
}
