package protocol

import (
	"encoding/json"
	"time"
)

// The shapes of agent run traces (runs.*) and per-agent postures
// (agent_permissions.*, agents.revoke) as the wire carries them; the stores
// that produce them are internal.

// RunsStartParams are the params of runs.start.
type RunsStartParams struct {
	Intent             string `json:"intent"`
	AgentID            string `json:"agent_id,omitempty"`
	AgentName          string `json:"agent_name,omitempty"`
	OutcomeDescription string `json:"outcome_description,omitempty"`
	IdempotencyKey     string `json:"idempotency_key,omitempty"`
}

// RunsStartResult is the reply to runs.start.
type RunsStartResult struct {
	AgentID string `json:"agent_id"`
	RunID   string `json:"run_id"`
}

// RunsCompleteParams are the params of runs.complete.
type RunsCompleteParams struct {
	RunID   string          `json:"run_id"`
	Outcome json.RawMessage `json:"outcome"` // an AgentOutcome
}

// RunsCompleteResult is the reply to runs.complete.
type RunsCompleteResult struct {
	OK    bool   `json:"ok"`
	RunID string `json:"run_id"`
}

// RunTurn is one turn as runs.record_turns takes it; the daemon numbers it.
type RunTurn struct {
	Prompt          any             `json:"prompt,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Parameters      any             `json:"parameters,omitempty"`
	Output          any             `json:"output,omitempty"`
	CliOutcome      json.RawMessage `json:"cli_outcome,omitempty"`
	VerifierVerdict json.RawMessage `json:"verifier_verdict,omitempty"`
	PolicyRejected  json.RawMessage `json:"policy_rejected,omitempty"`
	// Tokens is the spend the turn reports, folded into
	// events.cost_by_agent.
	Tokens *TokenUsage `json:"tokens,omitempty"`
}

// RunsRecordTurnsParams are the params of runs.record_turns.
type RunsRecordTurnsParams struct {
	RunID string   `json:"run_id"`
	Turns RunTurns `json:"turns"`
}

// RunTurns is a runs.record_turns batch, an array of RunTurn, as the wire
// carries it: the daemon reads each turn itself, keeping its numbers exact
// and naming a turn that is not a RunTurn.
type RunTurns json.RawMessage

// MarshalJSON writes the batch as it is.
func (t RunTurns) MarshalJSON() ([]byte, error) { return json.RawMessage(t).MarshalJSON() }

// UnmarshalJSON keeps the batch as sent.
func (t *RunTurns) UnmarshalJSON(b []byte) error { return (*json.RawMessage)(t).UnmarshalJSON(b) }

// JSONSchemaAlias documents the batch as the RunTurn array it holds.
func (RunTurns) JSONSchemaAlias() any { return []RunTurn{} }

// RunsRecordTurnsResult is the reply to runs.record_turns. A refused batch
// is ok false with the reason in dropped, and nothing of it is kept. Its
// members are in the order the daemon sends them, alphabetical.
type RunsRecordTurnsResult struct {
	BaseIndex int    `json:"base_index"`
	Count     int    `json:"count"`
	Dropped   string `json:"dropped,omitempty"` // run_not_found, run_terminal, run_turn_limit or turn_too_large
	OK        bool   `json:"ok"`
	RunID     string `json:"run_id"`
}

// RunIDParams are the params of runs.subscribe and runs.unsubscribe.
type RunIDParams struct {
	RunID string `json:"run_id"`
}

// RunRecord is one line of a run's trace. Record says which members it
// has: started (run and agent, intent, started_at), turn (index and the
// turn's fields) or ended (status, outcome, ended_at).
type RunRecord struct {
	Record string `json:"record"`

	RunID              string     `json:"run_id,omitempty"`
	AgentID            string     `json:"agent_id,omitempty"`
	AgentName          string     `json:"agent_name,omitempty"`
	Intent             string     `json:"intent,omitempty"`
	OutcomeDescription string     `json:"outcome_description,omitempty"`
	StartedAt          *time.Time `json:"started_at,omitempty"`

	Index           *int            `json:"index,omitempty"`
	Prompt          any             `json:"prompt,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Parameters      any             `json:"parameters,omitempty"`
	Output          any             `json:"output,omitempty"`
	CliOutcome      json.RawMessage `json:"cli_outcome,omitempty"`
	VerifierVerdict json.RawMessage `json:"verifier_verdict,omitempty"`
	PolicyRejected  json.RawMessage `json:"policy_rejected,omitempty"`
	Tokens          *TokenUsage     `json:"tokens,omitempty"`

	Status  string          `json:"status,omitempty"`
	Outcome json.RawMessage `json:"outcome,omitempty"`
	EndedAt *time.Time      `json:"ended_at,omitempty"`
}

// RunSnapshot is the reply to runs.subscribe: the run's records so far.
// Cursor is its turn count; runs.trace.event carries what follows.
type RunSnapshot struct {
	RunID      string      `json:"run_id"`
	AgentID    string      `json:"agent_id"`
	TurnsSoFar []RunRecord `json:"turns_so_far"`
	Cursor     int         `json:"cursor"`
	Status     string      `json:"status"` // in_progress, completed or incomplete
}

// RunTraceEvent is the params of runs.trace.event: one appended record.
// Cursor is the run's turn count after it; a gap is a dropped event.
type RunTraceEvent struct {
	RunID   string    `json:"run_id"`
	AgentID string    `json:"agent_id"`
	Record  RunRecord `json:"record"`
	Cursor  int       `json:"cursor"`
	Status  string    `json:"status"`
}

// RunsUnsubscribeResult is the reply to runs.unsubscribe.
type RunsUnsubscribeResult struct {
	Removed bool   `json:"removed"`
	RunID   string `json:"run_id"`
}

// AgentIDParams are the params of the methods that name one agent.
type AgentIDParams struct {
	AgentID string `json:"agent_id"`
}

// RunSummary is one run in runs.list.
type RunSummary struct {
	RunID     string     `json:"run_id"`
	AgentID   string     `json:"agent_id"`
	Intent    string     `json:"intent"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Status    string     `json:"status"`
	TurnCount int        `json:"turn_count"`
}

// RunsListResult is the reply to runs.list.
type RunsListResult struct {
	AgentID string       `json:"agent_id"`
	Runs    []RunSummary `json:"runs"`
}

// RunsGetTraceParams are the params of runs.get_trace: records from cursor.
type RunsGetTraceParams struct {
	RunID  string `json:"run_id"`
	Cursor int    `json:"cursor,omitempty"`
}

// RunsGetTraceResult is the reply to runs.get_trace: the records from the
// cursor, or not_found true (an unknown run and one the caller may not see
// get the same answer). Its members are in the order the daemon sends them,
// alphabetical.
type RunsGetTraceResult struct {
	AgentID  string      `json:"agent_id,omitempty"`
	Cursor   *int        `json:"cursor,omitempty"`
	NotFound bool        `json:"not_found,omitempty"`
	Records  []RunRecord `json:"records,omitzero"`
	RunID    string      `json:"run_id"`
}

// TierPosture is a posture mode (always_allow, require_approval or deny)
// per tier; an absent tier falls through to the default posture.
type TierPosture struct {
	ReadOnly    string `json:"read_only,omitempty"`
	SandboxEdit string `json:"sandbox_edit,omitempty"`
	FullAccess  string `json:"full_access,omitempty"`
}

// AgentPostures is the whole per-agent posture, the reply of every
// agent_permissions method but evaluate.
type AgentPostures struct {
	Default TierPosture            `json:"default"`
	Agents  map[string]TierPosture `json:"agents"`
}

// AgentPermissionsSetParams are the params of agent_permissions.set.
type AgentPermissionsSetParams struct {
	AgentID string `json:"agent_id"`
	Mode    string `json:"mode"`
	Tier    string `json:"tier,omitempty"` // every tier when absent
}

// AgentPermissionsSetDefaultParams are the params of
// agent_permissions.set_default: a preset (cautious, balanced, trusting),
// or a mode for one tier.
type AgentPermissionsSetDefaultParams struct {
	Preset string `json:"preset,omitempty"`
	Tier   string `json:"tier,omitempty"`
	Mode   string `json:"mode,omitempty"`
}

// AgentPermissionsEvaluateParams are the params of
// agent_permissions.evaluate.
type AgentPermissionsEvaluateParams struct {
	AgentID string `json:"agent_id"`
	Tier    string `json:"tier"`
}

// AgentPermissionsEvaluateResult is the reply to
// agent_permissions.evaluate: the mode in force, and whether it comes from
// the agent's own override. Its members are in the reply's order.
type AgentPermissionsEvaluateResult struct {
	AgentID     string `json:"agent_id"`
	HasOverride bool   `json:"has_override"`
	Mode        string `json:"mode"`
	Tier        string `json:"tier"`
}

// AgentsRevokeResult is the reply to agents.revoke.
type AgentsRevokeResult struct {
	AgentID           string `json:"agent_id"`
	Revoked           bool   `json:"revoked"`
	ConnectionsClosed int    `json:"connections_closed"`
}
