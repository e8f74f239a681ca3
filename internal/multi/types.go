// Package multi runs the multi-agent coordination shapes — swarm (parallel,
// sequential, debate), pipeline, supervisor, map-reduce, vote and tournament
// — with every agent run delegated to a Runner (the daemon's is the
// multi.run_agent callback to the calling client). It owns ordering,
// concurrency, budgets and the result shapes; it runs no model itself.
package multi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/parslee-ai/car-server/protocol"
)

// The coordination's wire shapes are protocol's; these names are the
// package's vocabulary for them.
type (
	AgentSpec   = protocol.AgentSpec
	TokenUsage  = protocol.TokenUsage
	AgentOutput = protocol.AgentOutput
)

// failedOutput is the output of an agent that did not run or did not answer.
func failedOutput(name, msg string) AgentOutput {
	return AgentOutput{Name: name, Error: &msg}
}

// Runner runs one agent on one task.
type Runner interface {
	RunAgent(ctx context.Context, spec AgentSpec, task string) (json.RawMessage, error)
}

// DecodeOutput reads a runner's reply as an AgentOutput, as upstream's
// decoder does: every field present with its type (tool_calls a count, not
// an array), error and tokens optional (a missing error is none), unknown
// keys ignored, in tokens too (cache_read_input_tokens). A field of the
// wrong type is an error naming it.
func DecodeOutput(raw json.RawMessage) (AgentOutput, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return AgentOutput{}, fmt.Errorf("the agent's reply must be an AgentOutput object {name, answer, turns, tool_calls, duration_ms, error}")
	}
	var out AgentOutput
	need := func(name string) (json.RawMessage, error) {
		v, ok := fields[name]
		if !ok {
			return nil, fmt.Errorf("AgentOutput field '%s' is missing", name)
		}
		return v, nil
	}
	str := func(name string, dst *string) error {
		v, err := need(name)
		if err != nil {
			return err
		}
		if json.Unmarshal(v, dst) != nil {
			return fmt.Errorf("AgentOutput field '%s' must be a string, got %s", name, v)
		}
		return nil
	}
	count := func(name string, dst *int) error {
		v, err := need(name)
		if err != nil {
			return err
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			if len(v) > 0 && v[0] == '[' {
				return fmt.Errorf("AgentOutput field '%s' must be an integer count, not an array", name)
			}
			return fmt.Errorf("AgentOutput field '%s' must be a non-negative integer, got %s", name, v)
		}
		*dst = int(f)
		return nil
	}
	if err := str("name", &out.Name); err != nil {
		return out, err
	}
	if err := str("answer", &out.Answer); err != nil {
		return out, err
	}
	if err := count("turns", &out.Turns); err != nil {
		return out, err
	}
	if err := count("tool_calls", &out.ToolCalls); err != nil {
		return out, err
	}
	v, err := need("duration_ms")
	if err != nil {
		return out, err
	}
	if json.Unmarshal(v, &out.DurationMs) != nil || out.DurationMs < 0 {
		return out, fmt.Errorf("AgentOutput field 'duration_ms' must be a non-negative number, got %s", v)
	}
	if v, ok := fields["error"]; ok && string(v) != "null" {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return out, fmt.Errorf("AgentOutput field 'error' must be null or a string, got %s", v)
		}
		out.Error = &s
	}
	if v, ok := fields["tokens"]; ok && string(v) != "null" {
		var tu TokenUsage
		if json.Unmarshal(v, &tu) != nil || tu.InputTokens < 0 || tu.OutputTokens < 0 || tu.CostUSD < 0 {
			return out, fmt.Errorf("AgentOutput field 'tokens' must be {input_tokens, output_tokens, cost_usd?} with non-negative values, got %s", v)
		}
		out.Tokens = &tu
	}
	return out, nil
}

// The params and replies of the coordinations (multi.*).
type (
	SwarmParams      = protocol.SwarmParams
	SwarmResult      = protocol.SwarmResult
	PipelineParams   = protocol.PipelineParams
	PipelineResult   = protocol.PipelineResult
	SupervisorParams = protocol.SupervisorParams
	SupervisorRound  = protocol.SupervisorRound
	SupervisorResult = protocol.SupervisorResult
	MapReduceParams  = protocol.MapReduceParams
	MapReduceResult  = protocol.MapReduceResult
	VoteParams       = protocol.VoteParams
	VoteTally        = protocol.VoteTally
	VoteResult       = protocol.VoteResult
	TournamentParams = protocol.TournamentParams
	MatchResult      = protocol.MatchResult
	TournamentResult = protocol.TournamentResult
)
