package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/protocol"
)

// tools.execute params are encoded by hand: byte for byte what json.Marshal
// writes for the struct.
func TestToolExecuteParamsEncodeAsMarshal(t *testing.T) {
	for _, p := range []protocol.ToolExecuteParams{
		{},
		{ActionID: "a1", Tool: "noop", Parameters: map[string]any{"i": json.Number("3"), "s": "<x>", "n": nil, "l": []any{true}}, TimeoutMs: 30000, Attempt: 1, RequestID: "cb-1", SessionID: "conn-1"},
		{ActionID: "é\"", Tool: "t\n", Parameters: map[string]any{}, TimeoutMs: 1<<64 - 1, Attempt: -2, RequestID: "cb-h9", AgentID: "agent", InvocationMode: "streaming", Handle: "h9"},
		{Parameters: map[string]any{"f": 1.5e-9, "nested": map[string]any{"b": 1, "a": 2.0}}},
		{ActionID: "a", Meta: &protocol.TraceMeta{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "car=1,<x>"}},
		{ActionID: "a", Meta: &protocol.TraceMeta{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{ActionID: "a", Meta: &protocol.TraceMeta{Tracestate: "only"}},
		{ActionID: "a", Meta: &protocol.TraceMeta{}},
		{ActionID: "a", Fence: &protocol.Fence{Key: "idem-<3>\"", Epoch: 1<<64 - 1}},
		{ActionID: "a", Fence: &protocol.Fence{}, Meta: &protocol.TraceMeta{Tracestate: "t"}},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendToolExecute(nil, &p, trace.SpanContext{})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("\n got  %s (%v)\n want %s", got, err, want)
		}
	}
}

// An execute_tool span given to the encoder is written as the Meta of its
// traceparent and tracestate would be.
func TestToolExecuteParamsEncodeASpanAsItsMeta(t *testing.T) {
	ts, err := trace.ParseTraceState("car=1,vendor=<x>")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []trace.SpanContext{
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 15: 0x36}, SpanID: trace.SpanID{0, 0xf0, 7: 0xb7}, TraceFlags: trace.FlagsSampled}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 15: 0xff}, SpanID: trace.SpanID{0xab, 7: 1}, TraceState: ts}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, TraceFlags: 0xff, TraceState: ts, Remote: true}),
	} {
		p := protocol.ToolExecuteParams{ActionID: "a", Tool: "noop", Parameters: map[string]any{"i": json.Number("1")}, RequestID: "cb-1",
			Fence: &protocol.Fence{Key: "k", Epoch: 2}}
		got, err := appendToolExecute(nil, &p, sc)
		if err != nil {
			t.Fatal(err)
		}
		tp, tst := tracing.Inject(trace.ContextWithSpanContext(context.Background(), sc))
		p.Meta = &protocol.TraceMeta{Traceparent: tp, Tracestate: tst}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\n got  %s\n want %s", got, want)
		}
	}
}

// A proposal's result is encoded by hand: byte for byte what json.Marshal
// writes.
func TestProposalResultEncodesAsMarshal(t *testing.T) {
	errText := "tool 'x' failed: <boom> & \"more\""
	for _, r := range []protocol.ProposalResult{
		{},
		{ProposalID: "p1", Results: []protocol.ActionResult{}},
		{ProposalID: "p\u2028", Results: []protocol.ActionResult{
			{ActionID: "a", Status: protocol.StatusSucceeded, Output: map[string]any{"ok": true, "n": json.Number("1.50")}, StateChanges: map[string]any{}, DurationMs: 0.123, Timestamp: "2026-11-30T00:00:00.123456789Z"},
			{ActionID: "b", Status: protocol.StatusFailed, Error: &errText, DurationMs: 1e-7, CacheHit: "result"},
			{ActionID: "c", Status: protocol.StatusSkipped, Output: []any{1.5, "x"}, StateChanges: map[string]any{"k": nil}, DurationMs: 12345},
		}, Cost: protocol.CostSummary{ToolCalls: 3, ActionsExecuted: 2, ActionsSkipped: 1, TotalDurationMs: 12.5, Retries: 1,
			Budget: &protocol.BudgetReport{Exceeded: "usd"}},
			Replans: []protocol.Replan{{Attempt: 1, ProposalID: "p2", Outcome: "failed", Error: "e"}}, ReplanError: "gave up"},
	} {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendProposalResult(nil, &r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("\n got  %s (%v)\n want %s", got, err, want)
		}
	}
}

// A tools.execute goes out with its params put on by the send hook, and its
// result comes back taken off by the receive hook: the frame on the wire is
// what the library would have written, and the action's output is what the
// client answered.
func TestToolExecuteFrameAndResultOnTheWire(t *testing.T) {
	ts := startServer(t, Options{})
	r := ts.raw(t)
	r.call(`{"jsonrpc":"2.0","id":1,"method":"server.handshake","params":{"protocol_version":` + strconv.Itoa(protocol.ProtocolVersion) + `}}`)
	if rep := r.call(`{"jsonrpc":"2.0","id":2,"method":"tools.register","params":[{"name":"echo"}]}`); rep.Error != nil {
		t.Fatalf("register: %+v", rep.Error)
	}
	r.send(`{"jsonrpc":"2.0","id":3,"method":"proposal.submit","params":{"proposal":{"actions":[` +
		`{"id":"a","type":"tool_call","tool":"echo","parameters":{"z":[1,2.50,"<&>"],"a":{"n":null}}}]}}}`)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, frame, err := r.ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      string          `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(frame, &req); err != nil || req.Method != protocol.MethodToolsExecute || req.JSONRPC != "2.0" {
		t.Fatalf("not a tools.execute request: %s (%v)", frame, err)
	}
	d := json.NewDecoder(bytes.NewReader(req.Params))
	d.UseNumber()
	var p protocol.ToolExecuteParams
	if err := d.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.ActionID != "a" || p.Tool != "echo" || p.RequestID != req.ID || p.Attempt != 1 || p.TimeoutMs == 0 {
		t.Fatalf("params %+v", p)
	}
	want, _ := json.Marshal(p)
	if !bytes.Equal(req.Params, want) {
		t.Fatalf("params on the wire\n %s\nwant what json.Marshal writes\n %s", req.Params, want)
	}
	if wantFrame := `{"id":"` + req.ID + `","jsonrpc":"2.0","method":"tools.execute","params":` + string(want) + `}`; string(frame) != wantFrame {
		t.Fatalf("frame\n %s\nwant\n %s", frame, wantFrame)
	}

	r.send(`{"jsonrpc":"2.0","id":"` + req.ID + `","result":{"echoed":[1,"x"],"n":12345678901234567890}}`)
	rep := r.mustRecv()
	var res protocol.ProposalResult
	if err := json.Unmarshal(rep.Result, &res); err != nil || len(res.Results) != 1 || res.Results[0].Status != protocol.StatusSucceeded {
		t.Fatalf("reply %s (%v)", rep.Result, err)
	}
	// The output is the answer as the client wrote it, its numbers exact.
	if want := `"output":{"echoed":[1,"x"],"n":12345678901234567890}`; !strings.Contains(string(rep.Result), want) {
		t.Fatalf("reply %s lacks %s", rep.Result, want)
	}
}
