package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// Spans of a proposal (docs/tracing.md draws the tree). Each step starts
// its span in the one function that owns the step: the proposal in
// Runtime.Submit, each admission gate in its loop there, an approval wait
// in awaitApprovals, a tool call in run.callTool, a rollback in
// run.rollback. With Options.Tracer nil nothing is started and nothing is
// allocated: startSpan hands back the span already in ctx (a no-op one).

// Span names.
const (
	SpanProposal     = "car.proposal"
	SpanGate         = "car.gate " // + the gate's name
	SpanApprovalWait = "car.approval.wait"
	SpanToolCall     = "execute_tool " // + the tool's name, as the GenAI conventions name it
	SpanRollback     = "car.rollback"
	SpanStream       = "car.tool.stream" // a detached invocation, from its start to its handle's end
)

// Attribute keys of the car.* namespace.
const (
	AttrProposalID      = attribute.Key("car.proposal.id")
	AttrAgentID         = attribute.Key("car.agent.id")
	AttrClient          = attribute.Key("car.client")
	AttrTenant          = attribute.Key("car.tenant")
	AttrScopeCaller     = attribute.Key("car.scope.caller")
	AttrScopeClaims     = attribute.Key("car.scope.claims")
	AttrActions         = attribute.Key("car.proposal.actions")
	AttrStatus          = attribute.Key("car.proposal.status")
	AttrToolCalls       = attribute.Key("car.cost.tool_calls")
	AttrExecuted        = attribute.Key("car.cost.actions_executed")
	AttrRejected        = attribute.Key("car.cost.actions_rejected")
	AttrSkipped         = attribute.Key("car.cost.actions_skipped")
	AttrRetries         = attribute.Key("car.cost.retries")
	AttrDurationMs      = attribute.Key("car.cost.duration_ms")
	AttrGate            = attribute.Key("car.gate.name")
	AttrVerdict         = attribute.Key("car.gate.verdict")
	AttrActionID        = attribute.Key("car.action.id")
	AttrTier            = attribute.Key("car.tool.tier")
	AttrIdempotent      = attribute.Key("car.tool.idempotent")
	AttrCacheHit        = attribute.Key("car.tool.cache_hit")
	AttrAttempts        = attribute.Key("car.tool.attempts")
	AttrApprovalID      = attribute.Key("car.approval.id")
	AttrFingerprint     = attribute.Key("car.approval.fingerprint")
	AttrRequiredTier    = attribute.Key("car.approval.required_tier")
	AttrDecision        = attribute.Key("car.approval.decision")
	AttrReviewer        = attribute.Key("car.approval.reviewer")
	AttrWaitMs          = attribute.Key("car.approval.wait_ms")
	AttrReplacesID      = attribute.Key("car.replaces.proposal_id")
	AttrRollbackKeys    = attribute.Key("car.rollback.keys")
	AttrRunID           = attribute.Key("car.run.id")
	AttrRequestID       = semconv.GenAIToolCallIDKey
	attrArguments       = semconv.GenAIToolCallArgumentsKey
	attrOperation       = semconv.GenAIOperationNameKey
	attrToolName        = semconv.GenAIToolNameKey
	attrErrorType       = semconv.ErrorTypeKey
	verdictAdmit        = "admit"
	verdictBlock        = "block"
	errorTypeTimeout    = "timeout"
	errorTypeCancelled  = "cancelled"
	errorTypeToolFailed = "tool_error"
)

// noSpan is the span startSpan returns when tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// tracing reports whether spans are started at all.
func (rt *Runtime) tracing() bool { return rt.opts.Tracer != nil }

// startSpan starts a child of the span in ctx, or, with tracing off, hands
// back ctx and a no-op span without allocating.
func (rt *Runtime) startSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if rt.opts.Tracer == nil {
		return ctx, noSpan
	}
	return rt.opts.Tracer.Start(ctx, name, opts...)
}

// proposalSpanStart is the attributes a proposal span starts with.
func proposalAttrs(sub *Submission) []attribute.KeyValue {
	kvs := []attribute.KeyValue{
		AttrProposalID.String(sub.Proposal.ID),
		AttrActions.Int(len(sub.Proposal.Actions)),
		AttrTenant.String(sub.Tenant),
	}
	if sub.Agent != "" {
		kvs = append(kvs, AttrAgentID.String(sub.Agent))
	} else {
		kvs = append(kvs, AttrClient.String(sub.Session.ID))
	}
	if sub.Caller != "" {
		kvs = append(kvs, AttrScopeCaller.String(sub.Caller))
	}
	if len(sub.Claims) > 0 {
		kvs = append(kvs, AttrScopeClaims.String(string(jsonvalue.Canonical(sub.Claims))))
	}
	if id := sub.runID(); id != "" {
		kvs = append(kvs, AttrRunID.String(id))
	}
	return kvs
}

// RunNamer is a TurnRecorder that names the run its turns go to; the
// proposal's spans and its tool calls' spans then carry the run id.
type RunNamer interface{ RunID() string }

// runID is the run the submission's tool calls are turns of, "" when none.
func (sub *Submission) runID() string {
	if n, ok := sub.Recorder.(RunNamer); ok {
		return n.RunID()
	}
	return ""
}

// endProposalSpan records a proposal's outcome and cost and ends its span.
func endProposalSpan(span trace.Span, res *protocol.ProposalResult) {
	if !span.IsRecording() {
		return
	}
	status := "succeeded"
	for _, ar := range res.Results { // failed, else the first other status
		if ar.Status == protocol.StatusFailed {
			status = string(ar.Status)
			break
		}
		if ar.Status != protocol.StatusSucceeded && status == "succeeded" {
			status = string(ar.Status)
		}
	}
	c := res.Cost
	span.SetAttributes(AttrStatus.String(status), AttrToolCalls.Int(c.ToolCalls), AttrExecuted.Int(c.ActionsExecuted),
		AttrRejected.Int(c.ActionsRejected), AttrSkipped.Int(c.ActionsSkipped), AttrRetries.Int(c.Retries), AttrDurationMs.Float64(c.TotalDurationMs))
	if status != "succeeded" {
		span.SetStatus(codes.Error, "proposal "+status)
	}
	span.End()
}

// endGateSpan records a gate's verdict and ends its span.
func endGateSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetAttributes(AttrVerdict.String(verdictBlock))
		span.SetStatus(codes.Error, LoggedError(err))
	} else {
		span.SetAttributes(AttrVerdict.String(verdictAdmit))
	}
	span.End()
}

// toolSpanStart is how an execute_tool span starts: made once, not per call.
var toolSpanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// toolAttrs are the buffers endToolSpan gathers a span's attributes in; the
// span copies them, so one is reused across calls.
var toolAttrs = sync.Pool{New: func() any { return new([toolAttrCount]attribute.KeyValue) }}

// toolAttrCount is the most attributes an execute_tool span has.
const toolAttrCount = 12

// endToolSpan records a tool call's attributes and how it ended, and ends
// its span. They are all set here, at once, the callback's request id
// among them: one copy of them into the span instead of one at its start
// and a growth at each later one.
func (r *run) endToolSpan(span trace.Span, i int, params map[string]any, hit string, call *tracedCall, err error) {
	if !span.IsRecording() {
		return
	}
	a, t := r.nodes[i].action, r.nodes[i].tool
	var tier policy.Tier
	if i < len(r.sub.tiers) {
		tier = r.sub.tiers[i] // the permission gate classified it already
	} else {
		tier = r.rt.Classify(a).Tier
	}
	buf := toolAttrs.Get().(*[toolAttrCount]attribute.KeyValue)
	defer func() { clear(buf[:]); toolAttrs.Put(buf) }()
	kvs := buf[:0]
	kvs = append(kvs,
		semconv.GenAIOperationNameExecuteTool,
		attrToolName.String(a.Tool), // the proposal's id is its parent's
		AttrActionID.String(a.ID),
		AttrTier.String(tier.String()),
		AttrIdempotent.Bool(a.Idempotent || t.Schema.Idempotent),
		AttrAttempts.Int(int(call.attempts.Load())),
	)
	// A call that ran has 7, a failed one 8 (9 in a run's turn): up to 8,
	// the SDK de-duplicates them at the span's end in a map that needs no
	// allocation.
	if hit != "" {
		kvs = append(kvs, AttrCacheHit.String(hit)) // which cache answered
	}
	if id := call.requestID(); id != "" {
		kvs = append(kvs, AttrRequestID.String(id)) // the last callback's
	}
	if r.rt.opts.TraceToolArguments {
		kvs = append(kvs, attrArguments.String(previewJSON(params))) // the operator's opt-in
	}
	if id := r.sub.runID(); id != "" {
		kvs = append(kvs, AttrRunID.String(id)) // the call is a turn of this run
	}
	if err != nil {
		kvs = append(kvs, attrErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, LoggedError(err))
	}
	span.SetAttributes(kvs...)
	span.End()
}

// errorType is the low-cardinality error.type of a failed tool call.
func errorType(err error) string {
	var to *toolTimeout
	switch {
	case errors.As(err, &to), errors.Is(err, context.DeadlineExceeded):
		return errorTypeTimeout
	case errors.Is(err, context.Canceled):
		return errorTypeCancelled
	default:
		return errorTypeToolFailed
	}
}

// spanEvent adds an event to the span in ctx when it records.
func spanEvent(ctx context.Context, name string, kvs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(kvs...))
	}
}

// tracedCall is the context of one traced tool call, carrying what its
// span records at the end that is learnt on the way: how many attempts it
// made, and the request id of its last callback (one allocation for all).
type tracedCall struct {
	context.Context
	attempts atomic.Int32
	mu       sync.Mutex
	id       string
}

type tracedCallKey struct{}

func (c *tracedCall) Value(key any) any {
	if key == (tracedCallKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *tracedCall) requestID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// countAttempt counts one attempt of the traced call in ctx.
func countAttempt(ctx context.Context) {
	if c, ok := ctx.Value(tracedCallKey{}).(*tracedCall); ok {
		c.attempts.Add(1)
	}
}

// NoteToolCallID records requestID as the gen_ai.tool.call.id of the
// execute_tool span in ctx, set when the span ends; the transport calls it
// for each callback it sends. False when ctx holds no traced tool call of
// the engine, and the caller then sets the attribute itself.
func NoteToolCallID(ctx context.Context, requestID string) bool {
	c, ok := ctx.Value(tracedCallKey{}).(*tracedCall)
	if !ok {
		return false
	}
	c.mu.Lock()
	c.id = requestID
	c.mu.Unlock()
	return true
}

// waitSpans are the car.approval.wait spans of one park, by fingerprint:
// each covers the time from the raise on the desk to the decision.
type waitSpans struct {
	open  map[string]trace.Span
	since map[string]time.Time
}

func (w *waitSpans) start(rt *Runtime, ctx context.Context, proposalID, fp string, op *waitingOp) {
	_, span := rt.startSpan(ctx, SpanApprovalWait, trace.WithAttributes(
		AttrProposalID.String(proposalID),
		AttrActionID.String(op.actions[0]),
		attrToolName.String(op.row.Tool),
		AttrApprovalID.String(op.approval.ID),
		AttrFingerprint.String(fp),
		AttrRequiredTier.String(op.row.Required.String()),
	))
	if w.open == nil {
		w.open, w.since = map[string]trace.Span{}, map[string]time.Time{}
	}
	w.open[fp], w.since[fp] = span, time.Now()
}

// end records a decision on the wait of fp and ends its span.
func (w *waitSpans) end(fp string, rec approvals.Record) {
	span, ok := w.open[fp]
	if !ok {
		return
	}
	delete(w.open, fp)
	span.SetAttributes(AttrDecision.String(rec.Decision), AttrReviewer.String(rec.Reviewer),
		AttrWaitMs.Float64(MsSince(w.since[fp])))
	span.End()
}

// endAll ends the waits still open when the park ended undecided.
func (w *waitSpans) endAll(err error) {
	for fp, span := range w.open {
		span.SetAttributes(AttrDecision.String("undecided"), AttrWaitMs.Float64(MsSince(w.since[fp])))
		if err != nil {
			span.SetStatus(codes.Error, LoggedError(err))
		}
		span.End()
	}
}

// traceStream spans a detached invocation from its start to its handle's
// end, as a child of its execute_tool span (which ends at the start): one
// goroutine per traced handle waits for the end.
func (rt *Runtime) traceStream(ctx context.Context, a *protocol.Action, h *streams.Handle) {
	_, span := rt.startSpan(ctx, SpanStream, trace.WithAttributes(attrToolName.String(a.Tool), AttrActionID.String(a.ID),
		attribute.String("car.tool.handle", h.Handle), attribute.String("car.tool.mode", string(a.InvocationMode))))
	go func() {
		<-h.Done()
		status, _, errText := rt.Streams.Outcome(h)
		span.SetAttributes(attribute.String("car.tool.stream_status", string(status)))
		if status != protocol.ToolSucceeded {
			span.SetStatus(codes.Error, errText)
		}
		span.End()
	}()
}

// SpanContext is the proposal span of the submission's attempt, for a log
// line of the proposal to name (invalid with tracing off, or before Submit).
func (sub *Submission) SpanContext() trace.SpanContext { return sub.span }

// previewJSON is a tool call's parameters as an approval's preview shows
// them (credentials redacted by key, long strings and containers cut), in
// JSON, for gen_ai.tool.call.arguments.
func previewJSON(params map[string]any) string {
	b, err := json.Marshal(policy.Preview(params))
	if err != nil {
		return ""
	}
	return string(b)
}
