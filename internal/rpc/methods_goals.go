package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/protocol"
)

// Goals and turns over the wire. goals.evaluate decides a goal condition
// from the daemon's ground truth and records nothing; goals.record and
// turns.record_completed append a durable event that names the caller's
// own principal and, when the connection has a run in progress, that run:
// who records is the connection, never a field of the params, so an agent
// records only its own verdicts.

// DefaultMaxGoalTextBytes bounds each text of goals.record and
// turns.record_completed, and goals.record's condition as JSON
// (max_goal_text_bytes).
const DefaultMaxGoalTextBytes = 16 << 10

const (
	goalsEvaluateShape = "{goal: GoalCondition, proposal_id?: string, tenant_id?: string}"
	goalsRecordShape   = "{goal: string, condition: GoalCondition, iteration: integer, met: boolean, grounded: boolean, reason: string, model?: string, model_tier?: string}"
	turnsShape         = "{decision: string, stop_reason?: string, was_truncated: boolean, turns: integer, model?: string}"
)

func (c *conn) goalsEvaluate(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.GoalsEvaluateParams
	if err := decodeParams(params, &p, goalsEvaluateShape); err != nil {
		return nil, err
	}
	if p.Goal == nil {
		return nil, invalidParams("goals.evaluate: param 'goal' is required: %s", goalsEvaluateShape)
	}
	if err := c.checkID("proposal_id", p.ProposalID); err != nil {
		return nil, err
	}
	if err := c.mayUseTenant(protocol.MethodGoalsEvaluate, p.TenantID); err != nil {
		return nil, err
	}
	if err := c.srv.rt.CheckGoal(p.Goal); err != nil {
		return nil, invalidParams("goals.evaluate: %v", err)
	}
	res, err := c.srv.rt.EvaluateGoal(ctx, p.Goal, engine.GoalInput{ProposalID: p.ProposalID, Tenant: p.TenantID, Connection: c.sess.ID})
	if err != nil {
		return nil, goalError(protocol.MethodGoalsEvaluate, err)
	}
	return res, nil
}

func (c *conn) goalsRecord(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.GoalsRecordParams
	if err := decodeParams(params, &p, goalsRecordShape); err != nil {
		return nil, err
	}
	switch {
	case p.Condition == nil:
		return nil, invalidParams("goals.record: param 'condition' is required: %s", goalsRecordShape)
	case p.Iteration == nil || p.Met == nil || p.Grounded == nil:
		return nil, invalidParams("goals.record: params 'iteration', 'met' and 'grounded' are required: %s", goalsRecordShape)
	}
	if err := requireString("goal", p.Goal, goalsRecordShape); err != nil {
		return nil, err
	}
	if err := checkCounter("iteration", *p.Iteration); err != nil {
		return nil, err
	}
	if err := c.checkTexts(map[string]string{"goal": p.Goal, "reason": p.Reason, "model": p.Model, "model_tier": p.ModelTier}); err != nil {
		return nil, err
	}
	if err := c.srv.rt.CheckGoal(p.Condition); err != nil {
		return nil, invalidParams("goals.record: condition: %v; nothing was recorded", err)
	}
	// The condition is recorded as sent, members of command and
	// model_judge included, within the same bound as the texts.
	var raw struct {
		Condition json.RawMessage `json:"condition"`
	}
	if err := json.Unmarshal(*params, &raw); err != nil {
		return nil, invalidParams("goals.record: %v", err)
	}
	if err := c.checkTexts(map[string]string{"condition (as JSON)": string(raw.Condition)}); err != nil {
		return nil, err
	}
	e, err := c.srv.rt.RecordGoalEvaluated(ctx, c.goalRecorder(), &p, raw.Condition)
	if err != nil {
		return nil, goalError(protocol.MethodGoalsRecord, err)
	}
	return recorded(e), nil
}

func (c *conn) turnsRecordCompleted(ctx context.Context, params *json.RawMessage) (any, error) {
	var p protocol.TurnsRecordCompletedParams
	if err := decodeKnownParams(params, &p, turnsShape); err != nil {
		return nil, err
	}
	if p.WasTruncated == nil || p.Turns == nil {
		return nil, invalidParams("turns.record_completed: params 'was_truncated' and 'turns' are required: %s", turnsShape)
	}
	if err := requireString("decision", p.Decision, turnsShape); err != nil {
		return nil, err
	}
	if err := checkCounter("turns", *p.Turns); err != nil {
		return nil, err
	}
	if err := c.checkTexts(map[string]string{"decision": p.Decision, "stop_reason": p.StopReason, "model": p.Model}); err != nil {
		return nil, err
	}
	e, err := c.srv.rt.RecordTurnCompleted(ctx, c.goalRecorder(), &p)
	if err != nil {
		return nil, goalError(protocol.MethodTurnsRecordCompleted, err)
	}
	return recorded(e), nil
}

// goalRecorder is who records: this connection, its principal, its bound
// agent and its run in progress.
func (c *conn) goalRecorder() engine.Recorder {
	c.runs.mu.Lock()
	runID := c.runs.current
	c.runs.mu.Unlock()
	return engine.Recorder{Connection: c.sess.ID, Principal: c.principalKind(), Agent: c.agentID(), RunID: runID}
}

// principalKind is the connection's principal as events name it: agent,
// plain or host.
func (c *conn) principalKind() string {
	switch {
	case c.isHost():
		return protocol.PrincipalHost
	case c.agentID() != "":
		return protocol.PrincipalAgent
	}
	return protocol.PrincipalPlain
}

// recorded is the reply to a record method.
func recorded(e engine.Event) protocol.RecordedEvent {
	runID, _ := e.Data["run_id"].(string)
	return protocol.RecordedEvent{Seq: e.Seq, Kind: string(e.Kind), RunID: runID}
}

// checkCounter bounds an iteration or turn count as upstream's 32 bits do.
func checkCounter(name string, n int64) error {
	if n < 0 || n > protocol.MaxGoalCounter {
		return invalidParams("param '%s' must be 0 to %d, got %d", name, int64(protocol.MaxGoalCounter), n)
	}
	return nil
}

// checkTexts bounds each text by max_goal_text_bytes.
func (c *conn) checkTexts(texts map[string]string) error {
	most := c.srv.opts.MaxGoalTextBytes
	for name, s := range texts {
		if len(s) > most {
			return invalidParams("param '%s' is %d bytes; at most %d are accepted (max_goal_text_bytes): shorten it; nothing was recorded", name, len(s), most)
		}
	}
	return nil
}

// checkID bounds an id param as proposal ids are bounded (max_action_id_bytes).
func (c *conn) checkID(name, id string) error {
	if most := c.srv.opts.MaxActionIDBytes; len(id) > most {
		return invalidParams("param '%s' is %d bytes; ids are at most %d (max_action_id_bytes)", name, len(id), most)
	}
	return nil
}

// goalError words an engine error of the goal methods once their params
// were checked: ground truth or the durable log that could not be reached.
func goalError(method string, err error) error {
	if isUnavailable(err) {
		return storeError(method, "nothing was decided or recorded", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return internalError("%s: %v", method, err)
}
