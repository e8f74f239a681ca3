package runs

import (
	"context"
	"encoding/json"
	"time"
)

// recordTimeout bounds how long a proposal's action waits to have its turn
// written (behind the appends ahead of it on the run).
const recordTimeout = time.Minute

// Recorder records a proposal's tool calls as turns of a run, through the
// same append path as runs.record_turns.
type Recorder struct {
	s     *Store
	runID string
	// OnError hears a turn that could not be recorded (the run ended, its
	// ceiling was reached, the disk failed); nil ignores it.
	OnError func(error)
}

// Recorder returns the recorder of a run.
func (s *Store) Recorder(runID string) *Recorder { return &Recorder{s: s, runID: runID} }

// RunID is the run the recorder appends to; the proposal's trace spans
// carry it.
func (r *Recorder) RunID() string { return r.runID }

// RecordToolCall appends one tool call: its tool, parameters and output
// (bounded like any turn), and, for an action a gate or policy rejected,
// policy_rejected with the output carrying the reason.
func (r *Recorder) RecordToolCall(tool string, params map[string]any, output any, errText string, rejected bool) {
	t := Turn{Tool: tool, Output: output}
	if params != nil {
		t.Parameters = params
	}
	if errText != "" {
		t.Output = map[string]any{"error": errText}
	}
	if rejected {
		t.PolicyRejected = json.RawMessage("true")
	}
	ctx, cancel := context.WithTimeout(r.s.ctx, recordTimeout)
	defer cancel()
	if _, err := r.s.Append(ctx, r.runID, []Turn{t}); err != nil && r.OnError != nil {
		r.OnError(err)
	}
}
