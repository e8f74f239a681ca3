package tracing

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The names of the two W3C Trace Context fields, as keys of an MCP
// request's _meta and as members of a JSON-RPC request's params.
const (
	TraceparentKey = "traceparent"
	TracestateKey  = "tracestate"
)

// W3C Trace Context, as the wire carries it: traceparent and tracestate in
// params._meta (as MCP does) or as top-level fields.
var w3c propagation.TraceContext

// carrier holds the two fields of W3C Trace Context.
type carrier struct{ traceparent, tracestate string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Extract returns ctx with the remote span a client named as the parent of
// what starts under it; a traceparent that does not parse is ignored, as
// the specification says.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, &carrier{traceparent: traceparent, tracestate: tracestate})
}

// AppendTraceparent appends the W3C traceparent of sc, the one Inject
// gives, without allocating: for an encoder that writes it straight into a
// message. sc must be valid.
func AppendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := [1]byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))} // the flags the specification defines
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, flags[:])
}

// Inject returns the traceparent and tracestate of the span in ctx, empty
// when ctx holds no valid span.
func Inject(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c carrier
	w3c.Inject(ctx, &c)
	return c.traceparent, c.tracestate
}
