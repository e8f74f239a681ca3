package rpc

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

// A request names its caller's span in params._meta, as MCP carries it, or
// as top-level members; _meta wins, and anything else names no parent.
func TestClientTraceContext(t *testing.T) {
	const (
		metaTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		topTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	cases := []struct {
		params, wantSpan, wantState string
	}{
		{`{"proposal":{},"_meta":{"traceparent":"` + metaTP + `","tracestate":"a=1","progressToken":7}}`, "00f067aa0ba902b7", "a=1"},
		{`{"traceparent":"` + topTP + `","tracestate":"b=2","proposal":{}}`, "b7ad6b7169203331", "b=2"},
		{`{"traceparent":"` + topTP + `","_meta":{"traceparent":"` + metaTP + `"}}`, "00f067aa0ba902b7", ""},
		{`{"_meta":"not an object","traceparent":"` + topTP + `"}`, "b7ad6b7169203331", ""},
		{`{"traceparent":"00-zz-yy-01"}`, "", ""},
		{`{"traceparent":7}`, "", ""},
		{`[1,2]`, "", ""},
		{`{}`, "", ""},
	}
	for _, c := range cases {
		raw := json.RawMessage(c.params)
		sc := trace.SpanContextFromContext(clientTraceContext(context.Background(), &raw))
		if c.wantSpan == "" {
			if sc.IsValid() {
				t.Errorf("%s: a parent %v", c.params, sc)
			}
			continue
		}
		if !sc.IsValid() || !sc.IsRemote() || sc.SpanID().String() != c.wantSpan || sc.TraceState().String() != c.wantState {
			t.Errorf("%s: parent %s state %q, want %s %q", c.params, sc.SpanID(), sc.TraceState().String(), c.wantSpan, c.wantState)
		}
	}
	if sc := trace.SpanContextFromContext(clientTraceContext(context.Background(), nil)); sc.IsValid() {
		t.Error("no params, but a parent")
	}
}

// Each multi.run_agent callback is an invoke_agent span under the
// coordinator's span, which is a child of the caller's, and carries its
// traceparent so that the agent's own spans join the trace.
func TestMultiAgentCallbacksAreSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	ts := startServerWith(t, serverSetup{opts: Options{Tracer: tracer}, engine: engine.Options{Tracer: tracer}})
	var mu sync.Mutex
	got := map[string]string{} // agent → the traceparent its callback carried
	c := ts.dial(t, "")
	c.HandleRequest(protocol.MethodMultiRunAgent, func(_ context.Context, raw json.RawMessage) (any, error) {
		var p protocol.RunAgentParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		mu.Lock()
		got[p.Spec.Name] = p.Meta.Traceparent
		mu.Unlock()
		return output(p.Spec.Name, "done", 0), nil
	})
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := c.Call(ctxT(t), protocol.MethodMultiSwarm, map[string]any{"mode": "parallel", "agents": specs("a", "b"), "task": "t",
		"_meta": map[string]any{"traceparent": caller}}, nil); err != nil {
		t.Fatal(err)
	}
	var coord sdktrace.ReadOnlySpan
	agents := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case protocol.MethodMultiSwarm:
			coord = s
		case spanInvokeAgent:
			for _, kv := range s.Attributes() {
				if kv.Key == "gen_ai.agent.name" {
					agents[kv.Value.AsString()] = s
				}
			}
		}
	}
	if coord == nil || coord.Parent().SpanID().String() != "00f067aa0ba902b7" || coord.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("coordinator span %v", coord)
	}
	if len(agents) != 2 {
		t.Fatalf("invoke_agent spans %v", agents)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, s := range agents {
		if s.Parent().SpanID() != coord.SpanContext().SpanID() {
			t.Errorf("%s: parent %s, want the coordinator's", name, s.Parent().SpanID())
		}
		if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext().SpanID().String() + "-01"; got[name] != want {
			t.Errorf("%s's callback carried %q, want %q", name, got[name], want)
		}
	}
}

// A streaming action's car.tool.stream span runs from the start to the
// handle's end, under the action's execute_tool span.
func TestAStreamIsASpanToItsEnd(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	ts := startServerWith(t, serverSetup{opts: Options{Tracer: tracer}, engine: engine.Options{Tracer: tracer}})
	tb := newStreamBox(t, ts, map[string]client.StreamFunc{"build": func(ctx context.Context, _ protocol.ToolExecuteParams, w *client.ChunkWriter) (any, error) {
		if err := w.Text(ctx, "compiling"); err != nil {
			return nil, err
		}
		return map[string]any{"exit": 0}, nil
	}})
	res := tb.submit(t, proposal(
		streaming("s", "build"),
		toolCall("b", "echo", map[string]any{"exit": "$s.result.exit"}, "await", []string{"s"}),
	))
	handle := handleOf(t, res, "s")
	var stream, exec sdktrace.ReadOnlySpan
	testwait.Eventually(t, testTimeout, "the stream's span to end", func() bool {
		for _, s := range rec.Ended() {
			switch s.Name() {
			case engine.SpanStream:
				stream = s
			case engine.SpanToolCall + "build":
				exec = s
			}
		}
		return stream != nil && exec != nil
	})
	attrs := map[string]string{}
	for _, kv := range stream.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsString()
	}
	if stream.Parent().SpanID() != exec.SpanContext().SpanID() || attrs["car.tool.handle"] != handle || attrs["car.tool.stream_status"] != "succeeded" || attrs["car.tool.mode"] != "streaming" {
		t.Fatalf("stream span: parent %s (execute_tool %s), attributes %v", stream.Parent().SpanID(), exec.SpanContext().SpanID(), attrs)
	}
	// The stream's span starts inside its start's span; a short stream may
	// end before the execute_tool span records its own end, so the ends are
	// not ordered.
	if stream.StartTime().Before(exec.StartTime()) || stream.EndTime().Before(stream.StartTime()) {
		t.Fatalf("the stream's span runs %s–%s, its execute_tool span from %s", stream.StartTime(), stream.EndTime(), exec.StartTime())
	}
}
