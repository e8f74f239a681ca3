package runs

import (
	"encoding/json"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// Run statuses, as the run log keeps them.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
)

// Record kinds, as the run log keeps them.
const (
	KindStarted = "started" // a run's record 0
	KindTurn    = "turn"    // counted in Head.Turns
	KindEnded   = "ended"   // the last record of a run that ended
)

// Reasons record_turns drops a batch (nothing of it is appended).
const (
	DropRunNotFound  = "run_not_found"  // no such run, or the caller does not own it
	DropRunTerminal  = "run_terminal"   // the run already ended
	DropRunTurnLimit = "run_turn_limit" // the batch would take the run past MaxTurns
	DropTurnTooLarge = "turn_too_large" // a turn stays over MaxTurnBytes even with its free text replaced
)

// Turn is one captured step of a run. Prompt, Parameters and Output are
// bounded by the store; the rest passes through as sent.
type Turn struct {
	Index           int             `json:"index"`
	Prompt          any             `json:"prompt,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Parameters      any             `json:"parameters,omitempty"`
	Output          any             `json:"output,omitempty"`
	CliOutcome      json.RawMessage `json:"cli_outcome,omitempty"`
	VerifierVerdict json.RawMessage `json:"verifier_verdict"`
	PolicyRejected  json.RawMessage `json:"policy_rejected,omitempty"`
	// Tokens is what the turn reports it spent; folded into cost by agent.
	Tokens *Usage `json:"tokens,omitempty"`
}

// Usage is spend a turn reports, in AgentOutput.tokens' shape.
type Usage = protocol.TokenUsage

// Record is one line of a run's trace: started, a turn, or ended.
type Record struct {
	Record string `json:"record"`

	// started
	RunID              string     `json:"run_id,omitempty"`
	AgentID            string     `json:"agent_id,omitempty"`
	AgentName          string     `json:"agent_name,omitempty"`
	Intent             string     `json:"intent,omitempty"`
	OutcomeDescription string     `json:"outcome_description,omitempty"`
	StartedAt          *time.Time `json:"started_at,omitempty"`

	// turn
	*Turn

	// ended
	Status  string          `json:"status,omitempty"`
	Outcome json.RawMessage `json:"outcome,omitempty"`
	EndedAt *time.Time      `json:"ended_at,omitempty"`
}

// Summary is a run as runs.list reports it.
type Summary = protocol.RunSummary

// Event is one appended record as a subscriber receives it: Cursor is the
// run's turn count after it.
type Event struct {
	RunID   string `json:"run_id"`
	AgentID string `json:"agent_id"`
	Record  Record `json:"record"`
	Cursor  int    `json:"cursor"`
	Status  string `json:"status"`
}

// Snapshot is a run's turns at the moment a subscription began.
type Snapshot struct {
	RunID      string   `json:"run_id"`
	AgentID    string   `json:"agent_id"`
	TurnsSoFar []Record `json:"turns_so_far"`
	Cursor     int      `json:"cursor"`
	Status     string   `json:"status"`
}
