package tracing

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLogFieldsNameTheSpan(t *testing.T) {
	if f := LogFields(trace.SpanContext{}); f != nil {
		t.Fatalf("fields for no span: %v", f)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	f := LogFields(trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	if len(f) != 2 || f[0].Key != "trace_id" || f[0].String != "4bf92f3577b34da6a3ce929d0e0e4736" || f[1].Key != "span_id" || f[1].String != "00f067aa0ba902b7" {
		t.Fatalf("fields %+v", f)
	}
}
