package protocol

// Planning over candidates: proposal.score ranks candidate proposals
// without side effects; proposal.plan ranks them and runs the best valid
// one through proposal.submit's path, falling back to the next-best when a
// run fails and aborts.

const (
	MethodProposalPlan  = "proposal.plan"
	MethodProposalScore = "proposal.score"
)

// Defaults of the planner's weights and cost targets: a candidate's score
// is success × w.success + cost × w.cost + actions × w.actions over the sum
// of the weights, each term in [0, 1].
const (
	DefaultPlanWeightSuccess = 0.8
	DefaultPlanWeightCost    = 0.1
	DefaultPlanWeightActions = 0.1
	// PlanTargetDurationMs is the estimated duration at and under which
	// the cost term is 1; above it the term is target/estimate.
	PlanTargetDurationMs = 5000.0
	// PlanTargetActions is the action count at and under which the actions
	// term is 1; above it the term is target/count.
	PlanTargetActions = 10
)

// PlanWeights weigh the terms of a candidate's score; an absent weight
// takes its default. Each is 0 to 1, and they may not all be 0.
type PlanWeights struct {
	Success *float64 `json:"success,omitempty"`
	Cost    *float64 `json:"cost,omitempty"`
	Actions *float64 `json:"actions,omitempty"`
}

// PlannerConfig is the planner's configuration for one call.
type PlannerConfig struct {
	Weights *PlanWeights `json:"weights,omitempty"`
	// WindowDays is the window of tool feedback the success term reads
	// (default 30, at most trajectory_retention_days).
	WindowDays *int `json:"window_days,omitempty"`
}

// ScoreParams are the params of proposal.score.
type ScoreParams struct {
	Candidates []Raw[ActionProposal] `json:"candidates"`
	Planner    *PlannerConfig        `json:"planner,omitempty"`
	// Scope's tenant is the namespace preconditions are read from, as
	// proposal.submit would run them.
	Scope *RuntimeScope `json:"scope,omitempty"`
}

// PlanParams are the params of proposal.plan: proposal.score's, and
// proposal.submit's session_id and scope, which every candidate that runs
// is submitted with.
type PlanParams struct {
	Candidates []Raw[ActionProposal] `json:"candidates"`
	Planner    *PlannerConfig        `json:"planner,omitempty"`
	SessionID  string                `json:"session_id,omitempty"`
	Scope      *RuntimeScope         `json:"scope,omitempty"`
}

// CandidateScore is how one candidate scored. An invalid candidate (verify
// found an error) scores 0 and is never run; Issues are its errors.
// ExpectedSuccess is the product of its tool calls' success rates (a tool
// with dispatched attempts in the window: its observed rate; any other:
// 0.5); EstimatedMs is the sum of their observed p50 durations (a tool
// without: 0).
type CandidateScore struct {
	Index           int           `json:"index"`
	ProposalID      string        `json:"proposal_id"`
	Valid           bool          `json:"valid"`
	Score           float64       `json:"score"`
	ExpectedSuccess float64       `json:"expected_success"`
	EstimatedMs     float64       `json:"estimated_ms"`
	Actions         int           `json:"actions"`
	Reasons         []string      `json:"reasons"`
	Issues          []VerifyIssue `json:"issues,omitempty"`
}

// ScoreResult is the reply to proposal.score: every candidate's score in
// the order given, and the indexes of the valid ones, best first (ties
// to the lower index).
type ScoreResult struct {
	Scores     []CandidateScore `json:"scores"`
	Ranking    []int            `json:"ranking"`
	WindowDays int              `json:"window_days"`
}

// Outcomes of one candidate's run in proposal.plan.
const (
	PlanSucceeded = "succeeded" // every action succeeded (or was skipped by failure_behavior skip)
	PlanFailed    = "failed"    // an action failed and the run aborted and rolled back: the next-best runs
	PlanRejected  = "rejected"  // a gate or a policy rejected an action: the plan stops here, as proposal.submit would
	PlanStopped   = "stopped"   // the plan was cancelled or ran out of budget while this one ran
)

// PlanAttempt is one candidate proposal.plan ran.
type PlanAttempt struct {
	Index      int    `json:"index"`
	ProposalID string `json:"proposal_id"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
}

// PlanResult is the reply to proposal.plan: the result of the last
// candidate run, which one it was, every score, and every run in order.
type PlanResult struct {
	Result     *ProposalResult  `json:"result"`
	Chosen     int              `json:"chosen"`
	Scores     []CandidateScore `json:"scores"`
	Attempts   []PlanAttempt    `json:"attempts"`
	WindowDays int              `json:"window_days"`
}

// PlanInvalidData is the data of proposal.plan's error when no candidate
// is valid: every candidate's score, with its issues.
type PlanInvalidData struct {
	Scores []CandidateScore `json:"scores"`
}
