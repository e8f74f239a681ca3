package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/protocol"
)

// recorded is a tracer whose ended spans a test reads back.
func recorded(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), rec
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanSeen records the span each tool call ran under.
type spanSeen struct {
	mu   sync.Mutex
	seen map[string]trace.SpanContext // by action id, the last attempt's
	fail map[string]int               // attempts of an action that fail
}

func (e *spanSeen) ExecuteTool(ctx context.Context, call ToolCall) (any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen[call.ActionID] = trace.SpanContextFromContext(ctx)
	// As the transport does for each callback it sends; false with tracing off.
	NoteToolCallID(ctx, call.ActionID+"-"+strconv.Itoa(call.Attempt))
	if e.fail[call.ActionID] > 0 {
		e.fail[call.ActionID]--
		return nil, errors.New("the disk is full")
	}
	return "ok", nil
}

func TestSpanTreeOfAProposal(t *testing.T) {
	tracer, rec := recorded(t)
	exec := &spanSeen{seen: map[string]trace.SpanContext{}, fail: map[string]int{"flaky": 1, "broken": 5}}
	rt, s := openRuntime(t, Options{Tracer: tracer, RetryBase: time.Millisecond}, exec, "t")
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(ctxT(t), parent)
	p := &protocol.ActionProposal{ID: "p1", Actions: []protocol.Action{
		{ID: "ok", Type: protocol.ActionToolCall, Tool: "t"},
		{ID: "flaky", Type: protocol.ActionToolCall, Tool: "t", FailureBehavior: protocol.FailRetry, MaxRetries: 1},
		{ID: "broken", Type: protocol.ActionToolCall, Tool: "t", FailureBehavior: protocol.FailSkip},
	}}
	if _, err := rt.Submit(ctx, &Submission{Proposal: p, Session: s, Agent: "agent-7", Tenant: "acme", Caller: "agent-7", Claims: map[string]any{"team": "ops", "level": 2}}); err != nil {
		t.Fatal(err)
	}

	props := spansNamed(rec, SpanProposal)
	if len(props) != 1 {
		t.Fatalf("%d proposal spans", len(props))
	}
	prop := props[0]
	if prop.Parent().SpanID() != parent.SpanID() || prop.SpanContext().TraceID() != parent.TraceID() {
		t.Fatalf("the proposal span's parent is %v, want the client's %v", prop.Parent(), parent)
	}
	for k, want := range map[attribute.Key]string{AttrProposalID: "p1", AttrAgentID: "agent-7", AttrTenant: "acme", AttrStatus: "skipped",
		AttrScopeCaller: "agent-7", AttrScopeClaims: `{"level":2,"team":"ops"}`} {
		if v, _ := attrOf(prop, k); v.AsString() != want {
			t.Errorf("proposal %s = %q, want %q", k, v.AsString(), want)
		}
	}
	if v, _ := attrOf(prop, AttrActions); v.AsInt64() != 3 {
		t.Errorf("proposal actions %v", v.AsInt64())
	}
	if v, _ := attrOf(prop, AttrToolCalls); v.AsInt64() != 4 {
		t.Errorf("tool calls %v, want 4 (ok, flaky twice, broken)", v.AsInt64())
	}

	gates := 0
	for _, sp := range rec.Ended() {
		if g, ok := attrOf(sp, AttrGate); ok {
			gates++
			if sp.Parent().SpanID() != prop.SpanContext().SpanID() || sp.Name() != SpanGate+g.AsString() {
				t.Errorf("gate span %s is not the proposal's child", sp.Name())
			}
			if v, _ := attrOf(sp, AttrVerdict); v.AsString() != verdictAdmit {
				t.Errorf("gate %s verdict %q", g.AsString(), v.AsString())
			}
		}
	}
	if gates != len(rt.gates) {
		t.Errorf("%d gate spans for %d gates", gates, len(rt.gates))
	}

	tools := spansNamed(rec, SpanToolCall+"t")
	if len(tools) != 3 {
		t.Fatalf("%d execute_tool spans, want one per action", len(tools))
	}
	for _, sp := range tools {
		id, _ := attrOf(sp, AttrActionID)
		if sp.Parent().SpanID() != prop.SpanContext().SpanID() || sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %v kind %v", id.AsString(), sp.Parent().SpanID(), sp.SpanKind())
		}
		if op, _ := attrOf(sp, attrOperation); op.AsString() != "execute_tool" {
			t.Errorf("%s: gen_ai.operation.name %q", id.AsString(), op.AsString())
		}
		if exec.seen[id.AsString()].SpanID() != sp.SpanContext().SpanID() {
			t.Errorf("%s: the executor did not run under the action's span", id.AsString())
		}
		attempts, _ := attrOf(sp, AttrAttempts)
		errType, failed := attrOf(sp, attrErrorType)
		if callID, _ := attrOf(sp, AttrRequestID); callID.AsString() != id.AsString()+"-"+strconv.FormatInt(attempts.AsInt64(), 10) {
			t.Errorf("%s: gen_ai.tool.call.id %q, want the last attempt's request id", id.AsString(), callID.AsString())
		}
		switch id.AsString() {
		case "ok":
			if attempts.AsInt64() != 1 || failed || sp.Status().Code == codes.Error {
				t.Errorf("ok: attempts %d, error %v", attempts.AsInt64(), sp.Status())
			}
		case "flaky":
			if attempts.AsInt64() != 2 || failed || len(sp.Events()) != 1 || sp.Events()[0].Name != "retry" {
				t.Errorf("flaky: attempts %d, events %v", attempts.AsInt64(), sp.Events())
			}
		case "broken":
			if attempts.AsInt64() != 1 || errType.AsString() != errorTypeToolFailed || sp.Status().Code != codes.Error || sp.Status().Description != "the disk is full" {
				t.Errorf("broken: attempts %d, error.type %q, status %v", attempts.AsInt64(), errType.AsString(), sp.Status())
			}
		}
	}
}

func TestABlockingGateSpanSaysWhy(t *testing.T) {
	tracer, rec := recorded(t)
	rt, s := openRuntime(t, Options{Tracer: tracer, Gates: []AdmissionGate{blockGate{}}}, &countingExecutor{}, "t")
	p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: "a", Type: protocol.ActionToolCall, Tool: "t"}}}
	if _, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}); err != nil {
		t.Fatal(err)
	}
	gates := spansNamed(rec, SpanGate+"test_gate")
	if len(gates) != 1 {
		t.Fatalf("%d spans of the blocking gate", len(gates))
	}
	if v, _ := attrOf(gates[0], AttrVerdict); v.AsString() != verdictBlock || gates[0].Status().Code != codes.Error {
		t.Fatalf("verdict %q status %v", v.AsString(), gates[0].Status())
	}
	if n := len(spansNamed(rec, SpanToolCall+"t")); n != 0 {
		t.Fatalf("%d tool spans of a blocked proposal", n)
	}
	prop := spansNamed(rec, SpanProposal)[0]
	if v, _ := attrOf(prop, AttrStatus); v.AsString() != string(protocol.StatusRejected) {
		t.Fatalf("status %q", v.AsString())
	}
	if v, _ := attrOf(prop, AttrClient); v.AsString() != s.ID {
		t.Fatalf("a plain client's proposal names it: %q", v.AsString())
	}
}

func TestTracingOffStartsNoSpan(t *testing.T) {
	exec := &spanSeen{seen: map[string]trace.SpanContext{}}
	rt, s := openRuntime(t, Options{}, exec, "t")
	p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: "a", Type: protocol.ActionToolCall, Tool: "t"}}}
	sub := &Submission{Proposal: p, Session: s}
	if _, err := rt.Submit(ctxT(t), sub); err != nil {
		t.Fatal(err)
	}
	if exec.seen["a"].IsValid() || sub.span.IsValid() {
		t.Fatal("a span with tracing off")
	}
}

// replanOnce answers the first replan.propose with a proposal that
// succeeds, and gives up after.
type replanOnce struct{ asked int }

func (r *replanOnce) Replan(context.Context, protocol.ReplanProposeParams) (*protocol.ActionProposal, error) {
	r.asked++
	if r.asked > 1 {
		return nil, nil
	}
	return &protocol.ActionProposal{ID: "second", Actions: []protocol.Action{{ID: "b", Type: protocol.ActionToolCall, Tool: "t"}}}, nil
}

// A replacement proposal's span links to the span of the attempt it
// replaced; both are children of the client's span.
func TestAReplanLinksToTheAttemptItReplaced(t *testing.T) {
	tracer, rec := recorded(t)
	exec := &spanSeen{seen: map[string]trace.SpanContext{}, fail: map[string]int{"a": 1}}
	rt, s := openRuntime(t, Options{Tracer: tracer}, exec, "t")
	p := &protocol.ActionProposal{ID: "first", Actions: []protocol.Action{{ID: "a", Type: protocol.ActionToolCall, Tool: "t"}}}
	rep := &replanOnce{}
	res, err := rt.Execute(ctxT(t), &Submission{Proposal: p, Session: s}, Recovery{Config: protocol.ReplanConfig{MaxReplans: 1}, Replanner: rep})
	if err != nil || len(res.Replans) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	props := spansNamed(rec, SpanProposal)
	if len(props) != 2 {
		t.Fatalf("%d proposal spans, want one per attempt", len(props))
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range props {
		id, _ := attrOf(sp, AttrProposalID)
		byID[id.AsString()] = sp
	}
	first, second := byID["first"], byID["second"]
	if first == nil || second == nil {
		t.Fatalf("proposal spans %v", byID)
	}
	if len(first.Links()) != 0 || len(second.Links()) != 1 || second.Links()[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
		t.Fatalf("links: first %v, second %v", first.Links(), second.Links())
	}
	if v, _ := attrOf(first, AttrStatus); v.AsString() != "failed" {
		t.Fatalf("first attempt's status %q", v.AsString())
	}
	if v, _ := attrOf(second, AttrStatus); v.AsString() != "succeeded" {
		t.Fatalf("second attempt's status %q", v.AsString())
	}
}

// runTurns is a TurnRecorder of a run, as runs.Recorder is.
type runTurns struct{ turns int }

func (r *runTurns) RecordToolCall(string, map[string]any, any, string, bool) { r.turns++ }
func (r *runTurns) RunID() string                                            { return "run-7" }

// A proposal whose tool calls are turns of a run carries the run id, on
// its span and on each tool call's; one without a run has none.
func TestARunsTurnsCarryTheRunID(t *testing.T) {
	tr, rec := recorded(t)
	rt, s := openRuntime(t, Options{Tracer: tr}, &spanSeen{seen: map[string]trace.SpanContext{}}, "t")
	turns := &runTurns{}
	for _, recorder := range []TurnRecorder{turns, nil} {
		p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: "a", Type: protocol.ActionToolCall, Tool: "t"}}}
		if _, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s, Recorder: recorder}); err != nil {
			t.Fatal(err)
		}
	}
	if turns.turns != 1 {
		t.Fatalf("%d turns recorded", turns.turns)
	}
	for _, name := range []string{SpanProposal, "execute_tool t"} {
		spans := spansNamed(rec, name)
		if len(spans) != 2 {
			t.Fatalf("%d spans %s", len(spans), name)
		}
		if v, ok := attrOf(spans[0], AttrRunID); !ok || v.AsString() != "run-7" {
			t.Errorf("%s of the run's proposal: car.run.id %q %v", name, v.AsString(), ok)
		}
		if v, ok := attrOf(spans[1], AttrRunID); ok {
			t.Errorf("%s of a proposal without a run has car.run.id %q", name, v.AsString())
		}
	}
}

// Off, no parameter value is on a tool call's span; on (the operator's
// opt-in), the resolved parameters are, redacted as an approval's preview.
func TestToolArgumentsOnlyOnOptInAndRedacted(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		tr, rec := recorded(t)
		rt, s := openRuntime(t, Options{Tracer: tr, TraceToolArguments: optIn}, &spanSeen{seen: map[string]trace.SpanContext{}}, "t")
		p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: "a", Type: protocol.ActionToolCall, Tool: "t",
			Parameters: map[string]any{"env": "prod", "authorization": "Bearer SECRET"}}}}
		if _, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}); err != nil {
			t.Fatal(err)
		}
		spans := spansNamed(rec, "execute_tool t")
		if len(spans) != 1 {
			t.Fatalf("%d execute_tool spans", len(spans))
		}
		v, ok := attrOf(spans[0], attribute.Key("gen_ai.tool.call.arguments"))
		switch {
		case !optIn && ok:
			t.Fatalf("arguments on the span without the opt-in: %s", v.AsString())
		case optIn && v.AsString() != `{"authorization":"[redacted]","env":"prod"}`:
			t.Fatalf("arguments with the opt-in: %q %v", v.AsString(), ok)
		}
		for _, kv := range spans[0].Attributes() {
			if strings.Contains(kv.Value.String(), "SECRET") {
				t.Fatalf("the secret is on the span: %s", kv.Key)
			}
		}
	}
}

// car.tool.cache_hit names the cache that answered a call, and is absent
// when the tool ran.
func TestACacheHitIsOnTheToolSpan(t *testing.T) {
	tracer, rec := recorded(t)
	exec := &spanSeen{seen: map[string]trace.SpanContext{}}
	rt, s := openRuntime(t, Options{Tracer: tracer}, exec)
	ttl := uint64(60)
	if _, err := s.Tools.Register([]protocol.ToolSchema{{Name: "cached", CacheTTLSecs: &ttl}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "second"} {
		p := &protocol.ActionProposal{Actions: []protocol.Action{{ID: id, Type: protocol.ActionToolCall, Tool: "cached", Parameters: map[string]any{"q": "same"}}}}
		if _, err := rt.Submit(ctxT(t), &Submission{Proposal: p, Session: s}); err != nil {
			t.Fatal(err)
		}
	}
	spans := spansNamed(rec, SpanToolCall+"cached")
	if len(spans) != 2 {
		t.Fatalf("%d execute_tool spans", len(spans))
	}
	for _, sp := range spans {
		id, _ := attrOf(sp, AttrActionID)
		hit, ok := attrOf(sp, AttrCacheHit)
		switch id.AsString() {
		case "first":
			if ok {
				t.Errorf("the call that ran has cache_hit %q", hit.AsString())
			}
		case "second":
			if hit.AsString() != "result" {
				t.Errorf("the call the result cache answered has cache_hit %q (present %v)", hit.AsString(), ok)
			}
		}
	}
	if _, ran := exec.seen["second"]; ran {
		t.Fatal("the second call ran: the cache did not answer it")
	}
}
