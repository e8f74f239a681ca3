package rpc

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/protocol"
)

// clientTraceContext returns ctx with the span a client named in a
// request's params as the parent of what the request starts: W3C Trace
// Context in params._meta (as MCP carries it) or as top-level traceparent
// and tracestate; _meta wins. Params without it, or a traceparent that
// does not parse, leave ctx as it is. Called only with tracing on.
func clientTraceContext(ctx context.Context, params *json.RawMessage) context.Context {
	if params == nil {
		return ctx
	}
	var top, meta protocol.TraceMeta
	jsonvalue.Members(*params, func(name, value []byte) bool {
		switch string(name) {
		case "_meta":
			_ = json.Unmarshal(value, &meta) // a _meta of another shape carries no trace context
		case "traceparent":
			_ = json.Unmarshal(value, &top.Traceparent)
		case "tracestate":
			_ = json.Unmarshal(value, &top.Tracestate)
		}
		return true
	})
	if meta.Traceparent != "" {
		return tracing.Extract(ctx, meta.Traceparent, meta.Tracestate)
	}
	return tracing.Extract(ctx, top.Traceparent, top.Tracestate)
}

// requestTrace is the span a request's log line names: the client's span
// from its trace context, or the span the request started (a proposal's),
// once its handler noted it. Put in the request's context by serve, with
// tracing on only.
type requestTrace struct{ sc trace.SpanContext }

type requestTraceKey struct{}

// withRequestTrace returns ctx holding the request's log span, at first
// the client's span in ctx.
func withRequestTrace(ctx context.Context) (context.Context, *requestTrace) {
	rt := &requestTrace{sc: trace.SpanContextFromContext(ctx)}
	return context.WithValue(ctx, requestTraceKey{}, rt), rt
}

// noteRequestSpan makes sc the span the request's log line names, when
// tracing holds a request trace in ctx and sc is a span.
func noteRequestSpan(ctx context.Context, sc trace.SpanContext) {
	if rt, ok := ctx.Value(requestTraceKey{}).(*requestTrace); ok && sc.IsValid() {
		rt.sc = sc
	}
}

// toolCallTrace is the execute_tool span in ctx, whose traceparent and
// tracestate a tools.execute carries in _meta (appendToolExecute writes
// them); the span records the callback's request id as its
// gen_ai.tool.call.id. Invalid when ctx holds no span.
func toolCallTrace(ctx context.Context, requestID string) trace.SpanContext {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() && !engine.NoteToolCallID(ctx, requestID) {
		span.SetAttributes(engine.AttrRequestID.String(requestID)) // not the engine's call span
	}
	return span.SpanContext()
}

// Spans of multi-agent coordination: the coordinator's span is named for
// its method (multi.swarm, …), and each agent callback is an invoke_agent
// span under it, as the GenAI conventions name an agent's invocation.
const (
	spanInvokeAgent = "invoke_agent"
	attrMultiMethod = attribute.Key("car.multi.method")
)

// endSpan ends a span, with status error and the error's text on failure.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
