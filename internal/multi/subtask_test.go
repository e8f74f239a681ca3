package multi

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// runnerFunc is a Runner.
type runnerFunc func(ctx context.Context, spec AgentSpec, task string) (json.RawMessage, error)

func (f runnerFunc) RunAgent(ctx context.Context, spec AgentSpec, task string) (json.RawMessage, error) {
	return f(ctx, spec, task)
}

// TestSpawnChecksTheToolsAgain: a spawn that reaches the spawner with a
// tool outside main.tools (the schema would have refused it first) is
// refused again, and no sub-agent runs; one within them runs; a spawn
// after the main agent has answered is refused.
func TestSpawnChecksTheToolsAgain(t *testing.T) {
	var subs atomic.Int32
	var sp *Spawner
	var outside, inside error
	runner := runnerFunc(func(ctx context.Context, spec AgentSpec, task string) (json.RawMessage, error) {
		if spec.Name == "main" {
			_, outside = sp.Spawn(ctx, "p", "a1", SpawnSubtaskParams{Name: "sub", Task: "t", Tools: []string{"read", "shell"}})
			_, inside = sp.Spawn(ctx, "p", "a2", SpawnSubtaskParams{Name: "sub", Task: "t", Tools: []string{"read"}})
		} else {
			subs.Add(1)
		}
		return json.RawMessage(`{"name":"` + spec.Name + `","answer":"ok","turns":1,"tool_calls":0,"duration_ms":1}`), nil
	})
	var schema protocol.ToolSchema
	released := false
	res, err := New(runner, nil, 4, nil).Subtask(t.Context(), SubtaskParams{Main: AgentSpec{Name: "main", Tools: []string{"read", "spawn_subtask"}}, Task: "go"},
		func(s protocol.ToolSchema, p *Spawner) (func(), error) {
			schema, sp = s, p
			return func() { released = true }, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if outside == nil || !strings.Contains(outside.Error(), "tool 'shell' is not one of the main agent's tools ('read')") {
		t.Errorf("spawn with shell: %v", outside)
	}
	if inside != nil || subs.Load() != 1 || len(res.Subtasks) != 1 || res.Spend.Agents != 1 || !released {
		t.Errorf("spawn with read: %v; %d sub-agents ran; result %+v; released %v", inside, subs.Load(), res, released)
	}
	if !strings.Contains(string(schema.Parameters), `"enum":["read"]`) {
		t.Errorf("schema %s: want tools to be an enum of read alone", schema.Parameters)
	}
	if _, err := sp.Spawn(t.Context(), "p", "late", SpawnSubtaskParams{Name: "late", Task: "t"}); err == nil || !strings.Contains(err.Error(), "has finished") {
		t.Errorf("spawn after the main agent answered: %v", err)
	}
}
