package rpc

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/protocol"
)

// TestMultiRepliesMatchTheDocument runs every multi.* coordination, with
// agents that answer, fail, and report tokens, and validates each reply
// against its result schema in openrpc.json, and each multi.run_agent the
// daemon sent against x-server-to-client.
func TestMultiRepliesMatchTheDocument(t *testing.T) {
	d := loadOpenRPC(t)
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	var (
		mu      sync.Mutex
		callErr []error
	)
	c.HandleRequest(protocol.MethodMultiRunAgent, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p protocol.RunAgentParams
		err := json.Unmarshal(raw, &p)
		mu.Lock()
		if derr := d.toClientParams(protocol.MethodMultiRunAgent, raw); derr != nil {
			callErr = append(callErr, derr)
		}
		mu.Unlock()
		if err != nil {
			return nil, err
		}
		switch {
		case p.Spec.Name == "broken":
			return map[string]any{"name": p.Spec.Name, "answer": "x"}, nil // not an AgentOutput: the output says so
		case p.Spec.Name == "judge":
			return output(p.Spec.Name, "A", 0), nil
		case p.Spec.Name == "lead": // multi.subtask's main agent spawns one sub-agent
			if err := c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": []any{spawnCall("s", "helper", "search")}}}, nil); err != nil {
				return nil, err
			}
			return output(p.Spec.Name, "led", 3), nil
		case strings.HasPrefix(p.Spec.Name, "boss"):
			return output(p.Spec.Name, "needs work", 0), nil
		}
		return output(p.Spec.Name, "answer of "+p.Spec.Name, 7), nil
	})
	budget := map[string]any{"max_agents": 6}
	steps := []struct {
		method string
		params map[string]any
		want   string // a member the reply must carry
	}{
		{protocol.MethodMultiSwarm, map[string]any{"mode": "debate", "agents": specs("a", "broken"), "task": "t", "synthesizer": spec("synth"), "rounds": 2}, `"rounds":`},
		{protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs("a", "b", "c"), "task": "t", "budget": map[string]any{"max_agents": 2}}, `"refused":1`},
		{protocol.MethodMultiPipeline, map[string]any{"stages": specs("a", "broken", "c"), "task": "t"}, `"error":`},
		{protocol.MethodMultiSupervisor, map[string]any{"workers": specs("w"), "supervisor": spec("boss"), "task": "t", "max_rounds": 2, "budget": budget}, `"review":`},
		{protocol.MethodMultiMapReduce, map[string]any{"mapper": spec("m"), "reducer": spec("broken"), "items": []string{"x", "y"}, "task": "t"}, `"fell_back":true`},
		{protocol.MethodMultiVote, map[string]any{"agents": specs("a", "b"), "task": "t", "synthesizer": spec("synth")}, `"votes":`},
		{protocol.MethodMultiTournament, map[string]any{"competitors": specs("a", "b", "c"), "judge": spec("judge"), "task": "t"}, `"bye":true`},
		{protocol.MethodMultiSubtask, map[string]any{"main": map[string]any{"name": "lead", "system_prompt": "", "tools": []string{"search"}, "max_turns": 2, "metadata": map[string]any{}}, "task": "t", "budget": budget}, `"subtasks":[{`},
	}
	for _, s := range steps {
		var raw json.RawMessage
		if err := c.Call(ctxT(t), s.method, s.params, &raw); err != nil {
			t.Fatalf("%s: %v", s.method, err)
		}
		if !strings.Contains(string(raw), s.want) {
			t.Errorf("%s: the reply lacks %s: %s", s.method, s.want, raw)
		}
		if err := d.result(s.method, raw); err != nil {
			t.Errorf("%s: the reply does not match openrpc.json: %v\nreply: %s", s.method, err, raw)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range callErr {
		t.Errorf("multi.run_agent does not match openrpc.json: %v", err)
	}
}
