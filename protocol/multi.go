package protocol

import "slices"

// The shapes of the multi-agent coordinations (multi.*): every agent run is
// a multi.run_agent request to the calling client, which answers an
// AgentOutput; the coordination answers the outputs, how they were
// combined, and what they spent.

// AgentSpec describes one agent of a multi.* coordination; the daemon passes
// it to the client as given.
type AgentSpec struct {
	Name         string   `json:"name"`
	SystemPrompt string   `json:"system_prompt"`
	Tools        []string `json:"tools"`
	MaxTurns     int      `json:"max_turns"`
	Metadata     Object   `json:"metadata"`
	CacheControl *bool    `json:"cache_control,omitempty"`
}

// RunAgentParams are the params of the multi.run_agent callback.
type RunAgentParams struct {
	Spec AgentSpec `json:"spec"`
	Task string    `json:"task"`
	// Meta carries the traceparent of the daemon's invoke_agent span when
	// tracing is on, so that the agent's own spans join the trace.
	Meta *TraceMeta `json:"_meta,omitempty"`
}

// TokenUsage is what an agent, or a run's turn, reports it spent.
type TokenUsage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// AgentOutput is a client's answer to multi.run_agent, and one agent's
// result in a coordination's reply. An agent that did not run or did not
// answer has Error set.
type AgentOutput struct {
	Name       string      `json:"name"`
	Answer     string      `json:"answer"`
	Turns      int         `json:"turns"`
	ToolCalls  int         `json:"tool_calls"`
	DurationMs float64     `json:"duration_ms"`
	Error      *string     `json:"error" jsonschema:"nullable"`
	Tokens     *TokenUsage `json:"tokens,omitempty"`
}

// Failed reports whether the agent produced no usable answer.
func (o AgentOutput) Failed() bool { return o.Error != nil }

// MultiBudget bounds a coordination; unset fields are unbounded. An agent
// is refused once a limit is reached; max_agents is checked when an agent
// starts.
type MultiBudget struct {
	MaxInputTokens  *int64   `json:"max_input_tokens,omitempty"`
	MaxOutputTokens *int64   `json:"max_output_tokens,omitempty"`
	MaxTotalTokens  *int64   `json:"max_total_tokens,omitempty"`
	MaxCostUSD      *float64 `json:"max_cost_usd,omitempty"`
	MaxAgents       *int     `json:"max_agents,omitempty"`
}

// MultiSpend is what a coordination used: the agents started and refused,
// and the spend they reported.
type MultiSpend struct {
	Agents       int     `json:"agents"`
	Refused      int     `json:"refused"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// SwarmParams are the params of multi.swarm. Mode is parallel, sequential,
// debate (rounds, default 2, at most 10) or hybrid (a parallel round, then
// one debate round).
type SwarmParams struct {
	Mode        string       `json:"mode"`
	Agents      []AgentSpec  `json:"agents"`
	Task        string       `json:"task"`
	Synthesizer *AgentSpec   `json:"synthesizer,omitempty"`
	Rounds      int          `json:"rounds,omitempty"`
	Budget      *MultiBudget `json:"budget,omitempty"`
}

// SwarmResult is the reply to multi.swarm. Rounds are every round's
// outputs (debate and hybrid); FellBack says the synthesizer failed and the
// final answer is the agents' answers joined.
type SwarmResult struct {
	Mode        string          `json:"mode"`
	Task        string          `json:"task"`
	Outputs     []AgentOutput   `json:"outputs"`
	Rounds      [][]AgentOutput `json:"rounds,omitempty"`
	Synthesizer *AgentOutput    `json:"synthesizer,omitempty"`
	FinalAnswer string          `json:"final_answer"`
	FellBack    bool            `json:"fell_back"`
	Spend       MultiSpend      `json:"spend"`
}

// PipelineParams are the params of multi.pipeline.
type PipelineParams struct {
	Stages []AgentSpec  `json:"stages"`
	Task   string       `json:"task"`
	Budget *MultiBudget `json:"budget,omitempty"`
}

// PipelineResult is the reply to multi.pipeline; a failed stage stops the
// pipeline, with Completed false and Error saying which.
type PipelineResult struct {
	Task        string        `json:"task"`
	Stages      []AgentOutput `json:"stages"`
	FinalAnswer string        `json:"final_answer"`
	Completed   bool          `json:"completed"`
	Error       string        `json:"error,omitempty"`
	Spend       MultiSpend    `json:"spend"`
}

// SupervisorParams are the params of multi.supervisor; MaxRounds is 1 to 20
// (default 3).
type SupervisorParams struct {
	Workers    []AgentSpec  `json:"workers"`
	Supervisor AgentSpec    `json:"supervisor"`
	Task       string       `json:"task"`
	MaxRounds  *int         `json:"max_rounds,omitempty"`
	Budget     *MultiBudget `json:"budget,omitempty"`
}

// SupervisorRound is one round of work and review in multi.supervisor.
type SupervisorRound struct {
	Round   int           `json:"round"`
	Workers []AgentOutput `json:"workers"`
	Review  AgentOutput   `json:"review"`
}

// SupervisorResult is the reply to multi.supervisor.
type SupervisorResult struct {
	Task        string            `json:"task"`
	Rounds      []SupervisorRound `json:"rounds"`
	Approved    bool              `json:"approved"`
	FinalAnswer string            `json:"final_answer"`
	FellBack    bool              `json:"fell_back"`
	Spend       MultiSpend        `json:"spend"`
}

// MapReduceParams are the params of multi.map_reduce.
type MapReduceParams struct {
	Mapper  AgentSpec    `json:"mapper"`
	Reducer AgentSpec    `json:"reducer"`
	Items   []string     `json:"items"`
	Task    string       `json:"task"`
	Budget  *MultiBudget `json:"budget,omitempty"`
}

// MapReduceResult is the reply to multi.map_reduce.
type MapReduceResult struct {
	Task        string        `json:"task"`
	Mapped      []AgentOutput `json:"mapped"`
	Reduced     AgentOutput   `json:"reduced"`
	FinalAnswer string        `json:"final_answer"`
	FellBack    bool          `json:"fell_back"`
	Spend       MultiSpend    `json:"spend"`
}

// VoteParams are the params of multi.vote.
type VoteParams struct {
	Agents      []AgentSpec  `json:"agents"`
	Task        string       `json:"task"`
	Synthesizer *AgentSpec   `json:"synthesizer,omitempty"`
	Budget      *MultiBudget `json:"budget,omitempty"`
}

// VoteTally is one distinct answer of multi.vote and who gave it.
type VoteTally struct {
	Answer string   `json:"answer"`
	Count  int      `json:"count"`
	Agents []string `json:"agents"`
}

// VoteResult is the reply to multi.vote.
type VoteResult struct {
	Task         string        `json:"task"`
	Outputs      []AgentOutput `json:"outputs"`
	Votes        []VoteTally   `json:"votes"`
	WinnerAnswer string        `json:"winner_answer"`
	WinnerCount  int           `json:"winner_count"`
	Synthesizer  *AgentOutput  `json:"synthesizer,omitempty"`
	FinalAnswer  string        `json:"final_answer"`
	Spend        MultiSpend    `json:"spend"`
}

// TournamentParams are the params of multi.tournament.
type TournamentParams struct {
	Competitors []AgentSpec  `json:"competitors"`
	Judge       AgentSpec    `json:"judge"`
	Task        string       `json:"task"`
	Budget      *MultiBudget `json:"budget,omitempty"`
}

// MatchResult is one match of a multi.tournament bracket.
type MatchResult struct {
	Round  int          `json:"round"`
	A      string       `json:"a"`
	B      string       `json:"b,omitempty"` // empty for a bye
	Winner string       `json:"winner"`
	Bye    bool         `json:"bye"`
	Judge  *AgentOutput `json:"judge,omitempty"`
	Reason string       `json:"reason"`
}

// TournamentResult is the reply to multi.tournament; Ranking orders the
// competitors by the round they fell in, the winner first.
type TournamentResult struct {
	Task         string        `json:"task"`
	Candidates   []AgentOutput `json:"candidates"`
	Matches      []MatchResult `json:"matches"`
	WinnerName   string        `json:"winner_name"`
	WinnerAnswer string        `json:"winner_answer"`
	Ranking      []string      `json:"ranking"`
	Spend        MultiSpend    `json:"spend"`
}

// ToolSpawnSubtask is the tool multi.subtask lends its main agent: a
// tool_call of it, in a proposal the client submits on the same connection
// while the main agent runs, starts one sub-agent.
const ToolSpawnSubtask = "spawn_subtask"

// MaxSubtaskTools bounds main.tools of multi.subtask: the enum of
// spawn_subtask's tools parameter.
const MaxSubtaskTools = 256

// SubtaskParams are the params of multi.subtask. Main.Tools is the set a
// sub-agent's tools must be a subset of.
type SubtaskParams struct {
	Main   AgentSpec    `json:"main"`
	Task   string       `json:"task"`
	Budget *MultiBudget `json:"budget,omitempty"`
}

// SpawnSubtaskParams are the parameters of a spawn_subtask call: the
// sub-agent's name, task and tools (each one of the main agent's), and
// optionally its system prompt, turns and metadata (default: the main
// agent's turns and metadata).
type SpawnSubtaskParams struct {
	Name         string   `json:"name"`
	Task         string   `json:"task"`
	Tools        []string `json:"tools"`
	SystemPrompt string   `json:"system_prompt,omitempty"`
	MaxTurns     *int     `json:"max_turns,omitempty"`
	Metadata     Object   `json:"metadata,omitempty"`
}

// SubtaskRecord is one spawn_subtask call: the proposal and action that
// made it, the sub-agent it asked for, and its output (error set when it
// was refused, failed or cut short).
type SubtaskRecord struct {
	ProposalID string      `json:"proposal_id"`
	ActionID   string      `json:"action_id"`
	Name       string      `json:"name"`
	Task       string      `json:"task"`
	Tools      []string    `json:"tools"`
	Output     AgentOutput `json:"output"`
}

// SubtaskResult is the reply to multi.subtask: the main agent's answer
// and output, and every spawn in the order they finished. Spend.Agents
// counts the sub-agents (what budget.max_agents caps), not the main agent.
type SubtaskResult struct {
	Task        string          `json:"task"`
	FinalAnswer string          `json:"final_answer"`
	Main        AgentOutput     `json:"main"`
	Subtasks    []SubtaskRecord `json:"subtasks"`
	Spend       MultiSpend      `json:"spend"`
}

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p SwarmParams) Specs() []AgentSpec { return withOptional(p.Agents, p.Synthesizer) }

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p PipelineParams) Specs() []AgentSpec { return p.Stages }

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p SupervisorParams) Specs() []AgentSpec { return append(slices.Clip(p.Workers), p.Supervisor) }

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p MapReduceParams) Specs() []AgentSpec { return []AgentSpec{p.Mapper, p.Reducer} }

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p VoteParams) Specs() []AgentSpec { return withOptional(p.Agents, p.Synthesizer) }

// Specs lists every agent a multi.* run may start, for the intent gate: a
// sub-agent's tools are a subset of the main agent's, so the main agent
// stands for them.
func (p SubtaskParams) Specs() []AgentSpec { return []AgentSpec{p.Main} }

// Specs lists every agent a multi.* run may start, for the intent gate.
func (p TournamentParams) Specs() []AgentSpec { return append(slices.Clip(p.Competitors), p.Judge) }

func withOptional(agents []AgentSpec, extra *AgentSpec) []AgentSpec {
	if extra == nil {
		return agents
	}
	return append(slices.Clip(agents), *extra)
}
