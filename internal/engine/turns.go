package engine

import "github.com/parslee-ai/car-server/protocol"

// TurnRecorder records a proposal's tool calls as turns of a run (the runs
// store's Recorder). It must not call back into the engine.
type TurnRecorder interface {
	RecordToolCall(tool string, params map[string]any, output any, errText string, rejected bool)
}

// recordTurn records a finished tool call, when the submission has a
// recorder: what ran, with its output or error, and what a gate or policy
// rejected. Skipped actions never ran and are not turns.
func (r *run) recordTurn(a *protocol.Action, out outcome) {
	if r.sub.Recorder == nil || a.Type != protocol.ActionToolCall || out.status == protocol.StatusSkipped {
		return
	}
	var errText string
	if out.err != nil {
		errText = out.err.Error()
	}
	r.sub.Recorder.RecordToolCall(a.Tool, a.Parameters, out.output, errText, out.status == protocol.StatusRejected)
}
