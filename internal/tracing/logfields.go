package tracing

import (
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// LogFields are the zap fields that tie a log line to a span, trace_id and
// span_id in the W3C hex form a trace backend searches by; none when sc
// is not a valid span.
func LogFields(sc trace.SpanContext) []zap.Field {
	if !sc.IsValid() {
		return nil
	}
	return []zap.Field{zap.String("trace_id", sc.TraceID().String()), zap.String("span_id", sc.SpanID().String())}
}
