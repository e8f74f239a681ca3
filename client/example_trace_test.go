package client_test

import (
	"context"
	"encoding/json"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/protocol"
)

// A traced agent names its span in proposal.submit's _meta (W3C Trace
// Context), so the daemon's proposal span is its child, and continues the
// trace in its tool from the traceparent each tools.execute carries (the
// daemon's execute_tool span). traceparent would come from the agent's
// tracer (an OpenTelemetry propagator's Inject); startToolSpan stands for
// its Extract and Start.
func Example_traceContext() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "ws://127.0.0.1:9100/", &client.Options{Token: "…"})
	if err != nil {
		return
	}
	defer c.Close()
	startToolSpan := func(parent protocol.TraceMeta) (end func()) { return func() {} }
	c.HandleRequest(protocol.MethodToolsExecute, func(ctx context.Context, params json.RawMessage) (any, error) {
		var call protocol.ToolExecuteParams
		if err := json.Unmarshal(params, &call); err != nil {
			return nil, err
		}
		if call.Meta != nil { // tracing is on in the daemon
			defer startToolSpan(*call.Meta)()
		}
		return map[string]any{"ok": true}, nil
	})
	traceparent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var res protocol.ProposalResult
	_ = c.Call(ctx, protocol.MethodProposalSubmit, map[string]any{
		"_meta":    protocol.TraceMeta{Traceparent: traceparent},
		"proposal": map[string]any{"actions": []any{map[string]any{"id": "a", "type": "tool_call", "tool": "lookup"}}},
	}, &res)
}
