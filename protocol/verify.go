package protocol

import "encoding/json"

// The analyses (verify, simulate, equivalent, optimize, verify.monte_carlo)
// read a proposal without running it: their params and replies.

// ProposalParams are the params of the methods that analyse one proposal.
type ProposalParams struct {
	Proposal Raw[ActionProposal] `json:"proposal"`
}

// VerifyParams are the params of verify and simulate.
type VerifyParams struct {
	Proposal     Raw[ActionProposal] `json:"proposal"`
	InitialState Object              `json:"initial_state,omitempty"`
}

// VerifyIssue is one finding of verify.
type VerifyIssue struct {
	ActionID string `json:"action_id"`
	Severity string `json:"severity"` // error, warning, info
	Message  string `json:"message"`
	Tier     string `json:"tier"` // decision_procedure, heuristic or sampled: how it was derived
}

// CheckRecord declares what one check of verify establishes and what it
// cannot.
type CheckRecord struct {
	Name         string `json:"name"`
	Ran          bool   `json:"ran"`
	Verifies     string `json:"verifies"`
	CannotVerify string `json:"cannot_verify"`
	Findings     int    `json:"findings"`
	Tier         string `json:"tier"`
}

// Evidence is the verifier's declared scope.
type Evidence struct {
	Checks          []CheckRecord `json:"checks"`
	Assumptions     []string      `json:"assumptions"`
	UntestedRegions []string      `json:"untested_regions"`
	ResidualRisks   []string      `json:"residual_risks"`
	Confidence      float64       `json:"confidence"`
}

// VerifyResult is the reply to verify. Each conflict is [action, action,
// key]: two writes of the key with no ordering between them.
type VerifyResult struct {
	Valid           bool          `json:"valid"`
	Issues          []VerifyIssue `json:"issues"`
	SimulatedState  Object        `json:"simulated_state"`
	ExecutionLevels [][]string    `json:"execution_levels"`
	Conflicts       [][3]string   `json:"conflicts"`
	Evidence        Evidence      `json:"evidence"`
}

// BlockedAction is an action simulate predicts the executor will not run.
type BlockedAction struct {
	ActionID string `json:"action_id"`
	Reason   string `json:"reason"`
}

// SimulateResult is the reply to simulate.
type SimulateResult struct {
	FinalState Object          `json:"final_state"`
	Blocked    []BlockedAction `json:"blocked"`
}

// EquivalentParams are the params of equivalent.
type EquivalentParams struct {
	A          Raw[ActionProposal] `json:"a"`
	B          Raw[ActionProposal] `json:"b"`
	TestStates []Object            `json:"test_states,omitempty"`
}

// Difference is one key on which two proposals disagree from one start
// state; A and B are the values (null when absent).
type Difference struct {
	StateIndex int    `json:"state_index"`
	Key        string `json:"key"`
	A          any    `json:"a"`
	B          any    `json:"b"`
	PresentInA bool   `json:"present_in_a"`
	PresentInB bool   `json:"present_in_b"`
}

// EquivalentResult is the reply to equivalent.
type EquivalentResult struct {
	Equivalent   bool         `json:"equivalent"`
	Differences  []Difference `json:"differences"`
	StatesTested int          `json:"states_tested"`
	Sampled      bool         `json:"sampled"`
	Note         string       `json:"note"`
}

// PrunedDependency is a state dependency optimize removed.
type PrunedDependency struct {
	ActionID string `json:"action_id"`
	Key      string `json:"key"`
	Reason   string `json:"reason"`
}

// OptimizeResult is the reply to optimize.
type OptimizeResult struct {
	Proposal *ActionProposal    `json:"proposal"`
	Pruned   []PrunedDependency `json:"pruned"`
}

// MonteCarloConfig are the optional knobs of verify.monte_carlo.
type MonteCarloConfig struct {
	Trials             *int     `json:"trials,omitempty"`
	Seed               *uint64  `json:"seed,omitempty"`
	DefaultSuccessRate *float64 `json:"default_success_rate,omitempty"`
	RetryAttempts      *int     `json:"retry_attempts,omitempty"`
}

// MonteCarloParams are the params of verify.monte_carlo. Goal is a goal
// condition, decoded by the engine: {type: state_predicate, key,
// operator? (eq), value} on one key, or {type: all_of|any_of, conditions};
// any other type cannot be decided from a simulated state, fails closed and
// is named in goal_underivable_conditions.
type MonteCarloParams struct {
	Proposal         Raw[ActionProposal] `json:"proposal"`
	InitialState     Object              `json:"initial_state,omitempty"`
	ToolSuccessRates map[string]float64  `json:"tool_success_rates,omitempty"`
	Goal             json.RawMessage     `json:"goal,omitempty"`
	RateWindowDays   *int                `json:"rate_window_days,omitempty"`
	Config           MonteCarloConfig    `json:"config,omitzero"`
}

// Distribution summarizes an integer per trial.
type Distribution struct {
	Mean float64 `json:"mean"`
	Min  int     `json:"min"`
	P50  int     `json:"p50"`
	P95  int     `json:"p95"`
	Max  int     `json:"max"`
}

// ValueProbability is one value a key ended with, and how often.
type ValueProbability struct {
	Value       any     `json:"value"`
	Probability float64 `json:"probability"`
}

// KeyDistribution is how a state key ended across trials.
type KeyDistribution struct {
	Key      string             `json:"key"`
	PPresent float64            `json:"p_present"`
	Values   []ValueProbability `json:"values"`
}

// ActionOutcome is how one action fared across trials.
type ActionOutcome struct {
	ActionID        string  `json:"action_id"`
	PRejected       float64 `json:"p_rejected"`
	PFailed         float64 `json:"p_failed"`
	PEffectsLanded  float64 `json:"p_effects_landed"`
	MeanBlastRadius float64 `json:"mean_blast_radius"`
}

// ToolRate says where one tool's rate came from; Succeeded and Dispatched
// are the recorded counts it was derived from (null: none were used).
type ToolRate struct {
	Tool       string  `json:"tool"`
	Rate       float64 `json:"rate"`
	Source     string  `json:"source"` // caller, trajectories or default
	Succeeded  *int    `json:"succeeded" jsonschema:"nullable"`
	Dispatched *int    `json:"dispatched" jsonschema:"nullable"`
}

// RateProvenance says where every rate came from.
type RateProvenance struct {
	WindowDays            int        `json:"window_days"`
	TrajectoriesAvailable bool       `json:"trajectories_available"`
	OverriddenByCaller    []string   `json:"overridden_by_caller"`
	Tools                 []ToolRate `json:"tools"`
}

// MonteCarloResult is the reply to verify.monte_carlo; PGoalReached is
// null without a goal.
type MonteCarloResult struct {
	Trials                    int               `json:"trials"`
	Seed                      uint64            `json:"seed"`
	PGoalReached              *float64          `json:"p_goal_reached" jsonschema:"nullable"`
	GoalUnderivableConditions []string          `json:"goal_underivable_conditions"`
	PAllEffectsLanded         float64           `json:"p_all_effects_landed"`
	ToolCalls                 Distribution      `json:"tool_calls"`
	ActionsExecuted           Distribution      `json:"actions_executed"`
	StateDistribution         []KeyDistribution `json:"state_distribution"`
	ActionOutcomes            []ActionOutcome   `json:"action_outcomes"`
	RateProvenance            RateProvenance    `json:"rate_provenance"`
}
