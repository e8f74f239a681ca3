package multi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/parslee-ai/car-server/protocol"
)

// The subtask coordination's wire shapes.
type (
	SubtaskParams      = protocol.SubtaskParams
	SubtaskResult      = protocol.SubtaskResult
	SubtaskRecord      = protocol.SubtaskRecord
	SpawnSubtaskParams = protocol.SpawnSubtaskParams
)

// Lender lends spawn_subtask, with schema, to the calling connection's
// proposals while the main agent runs: each call of it is sp.Spawn.
// release takes it back. Lending fails when it is lent already.
type Lender func(schema protocol.ToolSchema, sp *Spawner) (release func(), err error)

// Subtask runs the main agent with spawn_subtask lent to it. Its spec goes
// to the runner with spawn_subtask added to its tools; a sub-agent may be
// given any subset of the rest. When the main agent answers, the tool is
// taken back, spawns still running are cancelled and waited for, and the
// result lists every spawn. The main agent is not counted against
// max_agents: the budget caps the spawns.
func (c *Coordinator) Subtask(ctx context.Context, p SubtaskParams, lend Lender) (SubtaskResult, error) {
	if strings.TrimSpace(p.Task) == "" {
		return SubtaskResult{}, errors.New("task is required (a non-empty string)")
	}
	if p.Main.Name == "" {
		return SubtaskResult{}, errors.New("main needs a name")
	}
	if len(p.Main.Tools) > protocol.MaxSubtaskTools {
		return SubtaskResult{}, fmt.Errorf("main.tools names %d tools; at most %d: a sub-agent's tools are a subset of them", len(p.Main.Tools), protocol.MaxSubtaskTools)
	}
	allowed := make([]string, 0, len(p.Main.Tools))
	seen := make(map[string]bool, len(p.Main.Tools))
	for i, t := range p.Main.Tools {
		switch {
		case t == "" || len(t) > protocol.DefaultMaxIDBytes:
			return SubtaskResult{}, fmt.Errorf("main.tools[%d] must be a tool name of 1 to %d bytes", i, protocol.DefaultMaxIDBytes)
		case seen[t]:
			return SubtaskResult{}, fmt.Errorf("main.tools names '%s' twice", t)
		case t == protocol.ToolSpawnSubtask:
			continue // the main agent's own; never a sub-agent's
		}
		seen[t] = true
		allowed = append(allowed, t)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sp := &Spawner{c: c, main: p.Main, allowed: seen, names: allowed, ctx: sctx}
	release, err := lend(SpawnSchema(allowed), sp)
	if err != nil {
		return SubtaskResult{}, err
	}
	main := p.Main
	main.Tools = append(slices.Clip(allowed), protocol.ToolSpawnSubtask)
	out := c.runAgent(sctx, main, p.Task, false)
	sp.close()
	release()
	cancel(errors.New("the main agent has answered"))
	sp.wg.Wait()
	return SubtaskResult{Task: p.Task, FinalAnswer: out.Answer, Main: out, Subtasks: sp.recorded(), Spend: c.Spend()}, nil
}

// SpawnSchema is spawn_subtask's schema for a main agent with tools: its
// tools parameter is an array of their names (an enum), so the validator
// refuses any other before the call runs.
func SpawnSchema(tools []string) protocol.ToolSchema {
	items := map[string]any{"type": "string", "enum": tools}
	if len(tools) == 0 {
		items = map[string]any{"type": "string", "not": map[string]any{}}
	}
	params := map[string]any{
		"type":     "object",
		"required": []string{"name", "task", "tools"},
		"properties": map[string]any{
			"name":          map[string]any{"type": "string", "minLength": 1, "maxLength": protocol.DefaultMaxIDBytes},
			"task":          map[string]any{"type": "string", "minLength": 1},
			"tools":         map[string]any{"type": "array", "items": items, "uniqueItems": true},
			"system_prompt": map[string]any{"type": "string"},
			"max_turns":     map[string]any{"type": "integer", "minimum": 1},
			"metadata":      map[string]any{"type": "object"},
		},
		"additionalProperties": false,
	}
	raw, _ := json.Marshal(params) // maps of strings and numbers: never fails
	return protocol.ToolSchema{
		Name:        protocol.ToolSpawnSubtask,
		Description: "Start a sub-agent on a task with a subset of your tools; answers its AgentOutput. Several calls in one proposal run at once.",
		Parameters:  raw,
	}
}

// Spawner starts the sub-agents of one multi.subtask.
type Spawner struct {
	c       *Coordinator
	main    AgentSpec
	allowed map[string]bool
	names   []string
	ctx     context.Context // the coordination's: its end cancels running spawns

	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup
	records []SubtaskRecord
}

// Spawn runs one sub-agent for the spawn_subtask call actionID of
// proposalID. It checks the tools again (the schema has already), counts
// against the budget, and answers the sub-agent's output, or an error
// when it was refused or failed.
func (s *Spawner) Spawn(ctx context.Context, proposalID, actionID string, req SpawnSubtaskParams) (AgentOutput, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return AgentOutput{}, fmt.Errorf("%s: the multi.subtask that lent it has finished", protocol.ToolSpawnSubtask)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	for _, t := range req.Tools {
		if !s.allowed[t] {
			return AgentOutput{}, fmt.Errorf("%s: tool '%s' is not one of the main agent's tools (%s): a sub-agent gets a subset of them", protocol.ToolSpawnSubtask, t, nameList(s.names))
		}
	}
	if req.Name == "" || strings.TrimSpace(req.Task) == "" {
		return AgentOutput{}, fmt.Errorf("%s needs a name and a task", protocol.ToolSpawnSubtask)
	}
	spec := AgentSpec{Name: req.Name, SystemPrompt: req.SystemPrompt, Tools: slices.Clone(req.Tools), MaxTurns: s.main.MaxTurns, Metadata: s.main.Metadata, CacheControl: s.main.CacheControl}
	if spec.Tools == nil {
		spec.Tools = []string{}
	}
	if req.MaxTurns != nil {
		spec.MaxTurns = *req.MaxTurns
	}
	if req.Metadata != nil {
		spec.Metadata = req.Metadata
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	defer stop()
	out := s.c.runAgent(ctx, spec, req.Task, true)
	s.mu.Lock()
	s.records = append(s.records, SubtaskRecord{ProposalID: proposalID, ActionID: actionID, Name: req.Name, Task: req.Task, Tools: spec.Tools, Output: out})
	s.mu.Unlock()
	if out.Failed() {
		return out, fmt.Errorf("sub-agent '%s': %s", req.Name, *out.Error)
	}
	return out, nil
}

func (s *Spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

func (s *Spawner) recorded() []SubtaskRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.records)
	if out == nil {
		out = []SubtaskRecord{}
	}
	return out
}

// nameList is up to the first 20 names, quoted, and how many more.
func nameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	shown := names[:min(len(names), 20)]
	q := make([]string, len(shown))
	for i, n := range shown {
		q[i] = "'" + n + "'"
	}
	if more := len(names) - len(shown); more > 0 {
		return strings.Join(q, ", ") + fmt.Sprintf(" and %d more", more)
	}
	return strings.Join(q, ", ")
}
