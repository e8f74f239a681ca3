package protocol

// Goals and turns: a goal condition decided from the daemon's own ground
// truth (goals.evaluate), and the durable records of a client's goal
// verifier and of its turn loop's completion decision (goals.record,
// turns.record_completed). Upstream has them in-process only; the wire
// names are this project's.
const (
	MethodGoalsEvaluate        = "goals.evaluate"
	MethodGoalsRecord          = "goals.record"
	MethodTurnsRecordCompleted = "turns.record_completed"
)

// Goal condition types. The first six are decided from ground truth; the
// last two need a program or a model the daemon does not run, so they fail
// closed and are named as underivable.
const (
	GoalStatePredicate       = "state_predicate"
	GoalAllOf                = "all_of"
	GoalAnyOf                = "any_of"
	GoalToolReceiptsGrounded = "tool_receipts_grounded"
	GoalPlanAchieved         = "plan_achieved"
	GoalStateConsistent      = "state_consistent"
	GoalCommand              = "command"
	GoalModelJudge           = "model_judge"
)

// MaxGoalDepth is how deep all_of and any_of may nest in one condition.
const MaxGoalDepth = 16

// GoalCondition is what a goal is met by:
//   - state_predicate: state[key] compared with value by operator (eq,
//     the default; neq, gt, lt, gte, lte, exists, not_exists, contains);
//   - all_of / any_of: every / some of conditions;
//   - tool_receipts_grounded: every claim is grounded in the receipts of
//     goals.evaluate's proposal_id (receipts.verify's verdicts);
//   - plan_achieved: every action of proposal_id succeeded;
//   - state_consistent: every assumption holds against state now, and, with
//     proposal_id, the proposal passed a transaction check with no
//     conflict;
//   - command, model_judge: underivable here; they fail closed.
//
// Members another type carries (a command's cmd, a judge's prompt) are
// accepted and not read.
type GoalCondition struct {
	Type        string          `json:"type" jsonschema:"enum=state_predicate,enum=all_of,enum=any_of,enum=tool_receipts_grounded,enum=plan_achieved,enum=state_consistent,enum=command,enum=model_judge"`
	Key         string          `json:"key,omitempty"`
	Operator    string          `json:"operator,omitempty"`
	Value       any             `json:"value,omitempty"`
	Conditions  []GoalCondition `json:"conditions,omitempty"`
	Claims      []ToolClaim     `json:"claims,omitempty"`
	Assumptions []Assumption    `json:"assumptions,omitempty"`
}

// GoalsEvaluateParams are the params of goals.evaluate. ProposalID names
// the proposal whose receipts, outcome and transaction check the
// conditions that need one read; TenantID the state namespace the state
// predicates and assumptions read (as state.get's tenant_id).
type GoalsEvaluateParams struct {
	Goal       *GoalCondition `json:"goal"`
	ProposalID string         `json:"proposal_id,omitempty"`
	TenantID   string         `json:"tenant_id,omitempty"`
}

// GoalsEvaluateResult is the reply to goals.evaluate. Grounded says the
// verdict follows from ground truth alone: it would be the same whatever
// the underivable conditions said. Underivable names their types, sorted.
type GoalsEvaluateResult struct {
	Met         bool     `json:"met"`
	Grounded    bool     `json:"grounded"`
	Reason      string   `json:"reason"`
	Underivable []string `json:"underivable,omitempty"`
}

// GoalsRecordParams are the params of goals.record: a client's goal
// verifier's verdict on one iteration, and the model that produced the
// turn it judged.
type GoalsRecordParams struct {
	Goal      string         `json:"goal"`
	Condition *GoalCondition `json:"condition"`
	Iteration *int64         `json:"iteration"`
	Met       *bool          `json:"met"`
	Grounded  *bool          `json:"grounded"`
	Reason    string         `json:"reason"`
	Model     string         `json:"model,omitempty"`
	ModelTier string         `json:"model_tier,omitempty"`
}

// TurnsRecordCompletedParams are the params of turns.record_completed: a
// turn loop's completion decision, why it stopped, whether the last reply
// was truncated, and how many turns it ran.
type TurnsRecordCompletedParams struct {
	Decision     string `json:"decision"`
	StopReason   string `json:"stop_reason,omitempty"`
	WasTruncated *bool  `json:"was_truncated"`
	Turns        *int64 `json:"turns"`
	Model        string `json:"model,omitempty"`
}

// RecordedEvent is the reply to goals.record and turns.record_completed:
// the event as the log keeps it (durable when the reply arrives), with the
// run it was attached to ("": the connection had none).
type RecordedEvent struct {
	Seq   uint64 `json:"seq"`
	Kind  string `json:"kind"`
	RunID string `json:"run_id,omitempty"`
}

// MaxGoalCounter is the largest iteration and turns accepted: upstream
// counts them in 32 bits.
const MaxGoalCounter = 1<<32 - 1
