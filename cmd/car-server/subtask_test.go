package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestSubtaskSpawnsMeetThePolicies: over the real daemon, a spawn_subtask
// call is a tool call like any other: a policy that denies the tool
// rejects it, and no sub-agent starts; without the policy the same call
// runs its sub-agent.
func TestSubtaskSpawnsMeetThePolicies(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	c := d.dial(t)
	defer c.Close()
	var spawned protocol.ProposalResult
	var subs atomic.Int32
	c.HandleRequest(protocol.MethodMultiRunAgent, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p protocol.RunAgentParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		if p.Spec.Name != "lead" {
			subs.Add(1)
			return map[string]any{"name": p.Spec.Name, "answer": "sub done", "turns": 1, "tool_calls": 0, "duration_ms": 1}, nil
		}
		err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
			map[string]any{"id": "spawn", "type": "tool_call", "tool": protocol.ToolSpawnSubtask,
				"parameters": map[string]any{"name": "helper", "task": "help", "tools": []string{"search"}}}}}}, &spawned)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": "lead", "answer": string(spawned.Results[0].Status), "turns": 1, "tool_calls": 1, "duration_ms": 1}, nil
	})
	main := map[string]any{"name": "lead", "system_prompt": "", "tools": []string{"search"}, "max_turns": 2, "metadata": map[string]any{}}

	if err := c.Call(ctxT(t), protocol.MethodPolicyRegister, protocol.PolicyDefinition{Name: "no-spawning", Rule: "deny_tool", Target: protocol.ToolSpawnSubtask}, nil); err != nil {
		t.Fatal(err)
	}
	var res protocol.SubtaskResult
	if err := c.Call(ctxT(t), protocol.MethodMultiSubtask, map[string]any{"main": main, "task": "go"}, &res); err != nil {
		t.Fatal(err)
	}
	if res.FinalAnswer != "rejected" || !strings.Contains(spawned.Results[0].ErrorText(), "no-spawning") || len(res.Subtasks) != 0 || subs.Load() != 0 {
		t.Fatalf("with the policy: answer %q, spawn %+v, subtasks %+v, %d sub-agents", res.FinalAnswer, spawned.Results, res.Subtasks, subs.Load())
	}

	if err := c.Call(ctxT(t), protocol.MethodPolicyUnregister, map[string]any{"name": "no-spawning"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctxT(t), protocol.MethodMultiSubtask, map[string]any{"main": main, "task": "go"}, &res); err != nil {
		t.Fatal(err)
	}
	if res.FinalAnswer != "succeeded" || len(res.Subtasks) != 1 || res.Subtasks[0].Output.Answer != "sub done" || subs.Load() != 1 {
		t.Fatalf("without the policy: answer %q, subtasks %+v, %d sub-agents", res.FinalAnswer, res.Subtasks, subs.Load())
	}
}
