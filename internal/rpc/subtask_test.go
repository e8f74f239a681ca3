package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/multi"
	"github.com/parslee-ai/car-server/protocol"
)

func spawnCall(id, name string, tools ...string) map[string]any {
	return toolCall(id, protocol.ToolSpawnSubtask, map[string]any{"name": name, "task": "look into " + name, "tools": tools})
}

// subtaskClient answers multi.run_agent: the main agent runs main(ctx, c,
// spec), every sub-agent sub(ctx, spec, task).
func subtaskClient(t *testing.T, ts *testServer, main func(context.Context, *client.Client, multi.AgentSpec) (any, error), sub func(context.Context, multi.AgentSpec, string) (any, error)) *client.Client {
	t.Helper()
	c := ts.dial(t, "")
	c.HandleRequest(protocol.MethodMultiRunAgent, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p protocol.RunAgentParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		if p.Spec.Name == "lead" {
			return main(ctx, c, p.Spec)
		}
		return sub(ctx, p.Spec, p.Task)
	})
	return c
}

// TestMultiSubtaskSpawnsSubAgentsWithASubsetOfTools: the main agent sees
// spawn_subtask among its tools and calls it in a proposal on the same
// connection; two calls in one proposal run at once (each sub-agent waits
// until the other has started); a call naming a tool the main agent lacks
// is rejected before anything runs; max_agents refuses the spawn past it;
// and once the main agent has answered the tool is gone.
func TestMultiSubtaskSpawnsSubAgentsWithASubsetOfTools(t *testing.T) {
	ts := startServer(t, Options{})
	var (
		mu      sync.Mutex
		started = map[string]multi.AgentSpec{}
		both    = make(chan struct{})
	)
	var mainTools []string
	var outside, overBudget protocol.ProposalResult
	c := subtaskClient(t, ts,
		func(ctx context.Context, c *client.Client, spec multi.AgentSpec) (any, error) {
			mainTools = spec.Tools
			var res protocol.ProposalResult
			if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{
				spawnCall("s1", "reader", "read_file"), spawnCall("s2", "searcher", "search", "read_file"),
			}}}, &res); err != nil {
				return nil, err
			}
			for _, r := range res.Results {
				if r.Status != protocol.StatusSucceeded {
					return nil, errors.New("spawn " + r.ActionID + ": " + r.ErrorText())
				}
			}
			if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{spawnCall("s3", "escalator", "shell")}}}, &outside); err != nil {
				return nil, err
			}
			if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{spawnCall("s4", "third", "search")}}}, &overBudget); err != nil {
				return nil, err
			}
			a, _ := res.Result("s1")
			b, _ := res.Result("s2")
			answers := a.Output.(map[string]any)["answer"].(string) + " + " + b.Output.(map[string]any)["answer"].(string)
			return output("lead", answers, 5), nil
		},
		func(ctx context.Context, spec multi.AgentSpec, task string) (any, error) {
			mu.Lock()
			started[spec.Name] = spec
			if len(started) == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both: // the other sub-agent has started too
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return output(spec.Name, spec.Name+" found it", 3), nil
		})

	main := spec("lead")
	main["tools"] = []string{"read_file", "search"}
	var res protocol.SubtaskResult
	call(t, c, protocol.MethodMultiSubtask, map[string]any{"main": main, "task": "find the bug", "budget": map[string]any{"max_agents": 2}}, &res)

	if !slices.Equal(mainTools, []string{"read_file", "search", protocol.ToolSpawnSubtask}) {
		t.Errorf("the main agent's tools: %v", mainTools)
	}
	if res.FinalAnswer != "reader found it + searcher found it" || res.Main.Name != "lead" {
		t.Errorf("final answer %q, main %+v", res.FinalAnswer, res.Main)
	}
	if got := started["searcher"].Tools; !slices.Equal(got, []string{"search", "read_file"}) || started["reader"].MaxTurns != 3 {
		t.Errorf("sub-agents: %+v", started)
	}
	if r := outside.Results[0]; r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "spawn_subtask") {
		t.Errorf("a spawn with a tool outside main.tools: %+v", r)
	}
	if r := overBudget.Results[0]; r.Status != protocol.StatusFailed || !strings.Contains(r.ErrorText(), "max_agents (2) reached") {
		t.Errorf("a third spawn with max_agents 2: %+v", r)
	}
	if len(res.Subtasks) != 3 || res.Spend.Agents != 2 || res.Spend.Refused != 1 {
		t.Fatalf("subtasks %+v, spend %+v", res.Subtasks, res.Spend)
	}
	for _, st := range res.Subtasks {
		if st.ProposalID == "" || st.ActionID == "" || (st.Name == "third") != st.Output.Failed() {
			t.Errorf("record %+v", st)
		}
	}
	if _, ok := started["escalator"]; ok {
		t.Error("the sub-agent asking for a tool outside main.tools was started")
	}

	var list protocol.ToolsListResult
	call(t, c, protocol.MethodToolsList, nil, &list)
	for _, tool := range list.Tools {
		if tool.Name == protocol.ToolSpawnSubtask {
			t.Error("spawn_subtask is still listed after multi.subtask returned")
		}
	}
	var after protocol.ProposalResult
	call(t, c, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{spawnCall("late", "late", "search")}}}, &after)
	if r := after.Results[0]; r.Status != protocol.StatusRejected || !strings.Contains(r.ErrorText(), "unknown tool 'spawn_subtask'") {
		t.Errorf("spawn after multi.subtask: %+v", r)
	}
}

// TestMultiSubtaskRefusals: spawn_subtask cannot be registered, a second
// multi.subtask on the connection while one runs is refused, and main's
// bounds hold.
func TestMultiSubtaskRefusals(t *testing.T) {
	ts := startServer(t, Options{})
	var second error
	c := subtaskClient(t, ts,
		func(ctx context.Context, c *client.Client, spec multi.AgentSpec) (any, error) {
			second = c.Call(ctx, protocol.MethodMultiSubtask, map[string]any{"main": spec, "task": "again"}, nil)
			return output("lead", "done", 0), nil
		},
		func(context.Context, multi.AgentSpec, string) (any, error) {
			return nil, errors.New("no sub-agent expected")
		})

	err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: protocol.ToolSpawnSubtask}}, nil)
	if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, "'spawn_subtask' is the daemon's") {
		t.Errorf("registering spawn_subtask: %d %s", code, msg)
	}
	main := spec("lead")
	call(t, c, protocol.MethodMultiSubtask, map[string]any{"main": main, "task": "once"}, nil)
	if code, msg := rpcCode(t, second); code != protocol.CodeInvalidParams || !strings.Contains(msg, "already running on this connection") {
		t.Errorf("a second multi.subtask at once: %d %s", code, msg)
	}

	many := make([]string, protocol.MaxSubtaskTools+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for _, tc := range []struct {
		tools []string
		task  string
		want  string
	}{
		{many, "x", "main.tools names 257 tools; at most 256"},
		{many[:protocol.MaxSubtaskTools], "", "task is required"},
		{[]string{"a", "a"}, "x", "main.tools names 'a' twice"},
		{[]string{""}, "x", "main.tools[0] must be a tool name"},
	} {
		main["tools"] = tc.tools
		err := c.Call(ctxT(t), protocol.MethodMultiSubtask, map[string]any{"main": main, "task": tc.task}, nil)
		if code, msg := rpcCode(t, err); code != protocol.CodeInvalidParams || !strings.Contains(msg, tc.want) {
			t.Errorf("%d tools, task %q: %d %s; want %q", len(tc.tools), tc.task, code, msg, tc.want)
		}
	}
	main["tools"] = many[:protocol.MaxSubtaskTools]
	call(t, c, protocol.MethodMultiSubtask, map[string]any{"main": main, "task": "at the bound"}, nil)
}
