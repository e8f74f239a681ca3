package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/multi"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/protocol"
)

// Multi-agent coordination: every agent run is a multi.run_agent request to
// the calling connection, which answers an AgentOutput.

// agentConcurrency bounds the agents of one coordination running at once.
const agentConcurrency = 8

// agentRunner runs agents through the calling connection.
type agentRunner struct{ c *conn }

func (r agentRunner) RunAgent(ctx context.Context, spec multi.AgentSpec, task string) (_ json.RawMessage, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.srv.opts.ToolTimeout)
	defer cancel()
	<-r.c.ready
	params := protocol.RunAgentParams{Spec: spec, Task: task}
	if r.c.srv.opts.Tracer != nil {
		var span trace.Span
		ctx, span = r.c.srv.opts.Tracer.Start(ctx, spanInvokeAgent, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentNameKey.String(spec.Name)))
		if tp, ts := tracing.Inject(ctx); tp != "" {
			params.Meta = &protocol.TraceMeta{Traceparent: tp, Tracestate: ts}
		}
		defer func() { endSpan(span, err) }()
	}
	var raw json.RawMessage
	err = r.c.rpc.Call(ctx, protocol.MethodMultiRunAgent, params, &raw)
	switch {
	case err == nil:
		return raw, nil
	case errors.Is(err, jsonrpc2.ErrClosed):
		return nil, fmt.Errorf("the client disconnected before agent '%s' answered", spec.Name)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("agent '%s': %v", spec.Name, context.Cause(ctx))
	}
	var rerr *jsonrpc2.Error
	if errors.As(err, &rerr) {
		return nil, errors.New(rerr.Message)
	}
	return nil, err
}

// coordinate decodes params into P, puts its agents' tools through the
// intent gate, runs shape with a fresh coordinator and records each agent
// run as an event.
func coordinate[P interface{ Specs() []multi.AgentSpec }, R any](c *conn, ctx context.Context, method string, params *json.RawMessage, shape string,
	budgetOf func(*P) *multi.BudgetLimits, run func(*multi.Coordinator, context.Context, P) (R, error)) (any, error) {
	var p P
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	// The intent gate judges the agents' tools before any agent runs.
	if err := c.srv.rt.AdmitAgents(ctx, c.sess, method, p.Specs()); err != nil {
		var limit *engine.LimitError
		if errors.As(err, &limit) {
			return nil, invalidParams("%v", err)
		}
		return nil, rpcError(protocol.CodeApprovalDenied, "%s: %v", method, err)
	}
	co := multi.New(agentRunner{c}, budgetOf(&p), agentConcurrency, func(o multi.AgentOutput) {
		data := map[string]any{"method": method, "agent": o.Name, "turns": o.Turns, "tool_calls": o.ToolCalls, "duration_ms": o.DurationMs}
		if o.Error != nil {
			data["error"] = *o.Error
		}
		if o.Tokens != nil {
			data["tokens_in"], data["tokens_out"], data["cost_usd"] = o.Tokens.InputTokens, o.Tokens.OutputTokens, o.Tokens.CostUSD
		}
		c.srv.rt.Events.Append(engine.Event{Kind: engine.EventAgentRun, Connection: c.id, Data: data})
	})
	if tr := c.srv.opts.Tracer; tr != nil {
		var span trace.Span
		ctx, span = tr.Start(ctx, method, trace.WithAttributes(attrMultiMethod.String(method)))
		res, err := run(co, ctx, p)
		endSpan(span, err)
		if err != nil {
			return nil, invalidParams("%s: %v", method, err)
		}
		return res, nil
	}
	res, err := run(co, ctx, p)
	if err != nil {
		return nil, invalidParams("%s: %v", method, err)
	}
	return res, nil
}

const agentShape = "AgentSpec {name, system_prompt, tools, max_turns, metadata}"

func (c *conn) multiSwarm(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiSwarm, params, "{mode: parallel|sequential|debate|hybrid, agents: "+agentShape+"[], task, synthesizer?, rounds?, budget?}",
		func(p *multi.SwarmParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).Swarm)
}

func (c *conn) multiPipeline(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiPipeline, params, "{stages: "+agentShape+"[], task, budget?}",
		func(p *multi.PipelineParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).Pipeline)
}

func (c *conn) multiSupervisor(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiSupervisor, params, "{workers: AgentSpec[], supervisor: AgentSpec, task, max_rounds?, budget?}",
		func(p *multi.SupervisorParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).Supervisor)
}

func (c *conn) multiMapReduce(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiMapReduce, params, "{mapper: AgentSpec, reducer: AgentSpec, items: string[], task, budget?}",
		func(p *multi.MapReduceParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).MapReduce)
}

func (c *conn) multiVote(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiVote, params, "{agents: AgentSpec[], task, synthesizer?, budget?}",
		func(p *multi.VoteParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).Vote)
}

func (c *conn) multiTournament(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiTournament, params, "{competitors: AgentSpec[], judge: AgentSpec, task, budget?}",
		func(p *multi.TournamentParams) *multi.BudgetLimits { return p.Budget }, (*multi.Coordinator).Tournament)
}

func (c *conn) multiSubtask(ctx context.Context, params *json.RawMessage) (any, error) {
	return coordinate(c, ctx, protocol.MethodMultiSubtask, params, "{main: "+agentShape+", task, budget?}",
		func(p *multi.SubtaskParams) *multi.BudgetLimits { return p.Budget },
		func(co *multi.Coordinator, ctx context.Context, p multi.SubtaskParams) (multi.SubtaskResult, error) {
			return co.Subtask(ctx, p, c.lendSpawnSubtask)
		})
}

// lendSpawnSubtask lends spawn_subtask to this connection's proposals while
// a multi.subtask runs: the engine runs each call through spawnExecutor,
// after every gate, like any tool call.
func (c *conn) lendSpawnSubtask(schema protocol.ToolSchema, sp *multi.Spawner) (func(), error) {
	return c.sess.Tools.Lend(schema, protocol.MethodMultiSubtask, spawnExecutor{sp})
}

// spawnExecutor runs spawn_subtask calls as sub-agents.
type spawnExecutor struct{ sp *multi.Spawner }

func (e spawnExecutor) ExecuteTool(ctx context.Context, call engine.ToolCall) (any, error) {
	raw, err := json.Marshal(call.Parameters)
	if err != nil {
		return nil, err
	}
	var req protocol.SpawnSubtaskParams
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("%s: parameters must be {name, task, tools, system_prompt?, max_turns?, metadata?}: %v", protocol.ToolSpawnSubtask, err)
	}
	out, err := e.sp.Spawn(ctx, call.ProposalID, call.ActionID, req)
	if err != nil {
		return nil, err
	}
	// The output as a JSON value, so that references into it
	// ($id.output.answer) resolve as into any tool's.
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}
