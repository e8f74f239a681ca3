package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// toolFunc implements one tool on the test client.
type toolFunc func(ctx context.Context, call protocol.ToolExecuteParams) (any, error)

// toolbox is a client that implements tools and records every callback and
// every tools.cancel it receives.
type toolbox struct {
	*client.Client
	mu      sync.Mutex
	tools   map[string]toolFunc
	calls   []protocol.ToolExecuteParams
	cancels []protocol.ToolCancelParams
	cancel  chan protocol.ToolCancelParams
}

func newToolbox(t *testing.T, ts *testServer, tools map[string]toolFunc) *toolbox {
	t.Helper()
	return newToolboxOn(t, ts.dial(t, ""), tools)
}

// newToolboxOn is newToolbox on a client already connected (bound to an
// agent, say).
func newToolboxOn(t *testing.T, c *client.Client, tools map[string]toolFunc) *toolbox {
	t.Helper()
	tb := &toolbox{Client: c, tools: tools, cancel: make(chan protocol.ToolCancelParams, 16)}
	tb.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var call protocol.ToolExecuteParams
		if err := json.Unmarshal(raw, &call); err != nil {
			return nil, err
		}
		tb.mu.Lock()
		tb.calls = append(tb.calls, call)
		f := tb.tools[call.Tool]
		tb.mu.Unlock()
		if f == nil {
			return nil, fmt.Errorf("unknown tool: %s", call.Tool)
		}
		return f(ctx, call)
	})
	tb.HandleNotification(protocol.MethodToolsCancel, func(raw json.RawMessage) {
		var p protocol.ToolCancelParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Errorf("tools.cancel is not ToolCancelParams: %v: %s", err, raw)
			return
		}
		tb.mu.Lock()
		tb.cancels = append(tb.cancels, p)
		tb.mu.Unlock()
		select {
		case tb.cancel <- p:
		default:
		}
	})
	defs := make([]protocol.ToolSchema, 0, len(tools))
	for name := range tools {
		defs = append(defs, protocol.ToolSchema{Name: name})
	}
	if err := tb.Call(ctxT(t), protocol.MethodToolsRegister, defs, nil); err != nil {
		t.Fatal(err)
	}
	return tb
}

// register adds tools with full schemas, implemented by impl.
func (tb *toolbox) register(t *testing.T, impl toolFunc, defs ...map[string]any) {
	t.Helper()
	tb.mu.Lock()
	for _, d := range defs {
		tb.tools[d["name"].(string)] = impl
	}
	tb.mu.Unlock()
	if err := tb.Call(ctxT(t), protocol.MethodToolsRegister, defs, nil); err != nil {
		t.Fatal(err)
	}
}

func (tb *toolbox) callLog() []protocol.ToolExecuteParams {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]protocol.ToolExecuteParams(nil), tb.calls...)
}

// submit sends a proposal and returns its result.
func (tb *toolbox) submit(t *testing.T, proposal any) protocol.ProposalResult {
	t.Helper()
	var res protocol.ProposalResult
	if err := tb.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": proposal}, &res); err != nil {
		t.Fatalf("proposal.submit: %v", err)
	}
	return res
}

// echo answers with its parameters.
func echo(_ context.Context, call protocol.ToolExecuteParams) (any, error) {
	return call.Parameters, nil
}

// proposal builds {"actions": [...]}.
func proposal(actions ...map[string]any) map[string]any {
	list := make([]any, len(actions))
	for i, a := range actions {
		list[i] = a
	}
	return map[string]any{"id": "p-test", "actions": list}
}

func toolCall(id, tool string, params map[string]any, extra ...any) map[string]any {
	a := map[string]any{"id": id, "type": "tool_call", "tool": tool, "parameters": params}
	for i := 0; i+1 < len(extra); i += 2 {
		a[extra[i].(string)] = extra[i+1]
	}
	return a
}

// statuses returns action_id → status.
func statuses(res protocol.ProposalResult) map[string]protocol.ActionStatus {
	out := map[string]protocol.ActionStatus{}
	for _, r := range res.Results {
		out[r.ActionID] = r.Status
	}
	return out
}

func resultOf(t *testing.T, res protocol.ProposalResult, id string) protocol.ActionResult {
	t.Helper()
	r, ok := res.Result(id)
	if !ok {
		t.Fatalf("no result for action %s", id)
	}
	return r
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
