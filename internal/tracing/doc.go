// Package tracing is the daemon's OpenTelemetry trace pipeline: the
// settings (the standard OTEL_* variables and their flag equivalents), the
// tracer provider with an OTLP exporter (HTTP/protobuf, our own encoder of
// the ended spans in otlpencode.go and otlphttp.go; or gRPC, the SDK's), the
// bounded asynchronous queue between the spans and the exporter with its
// drops counted in /metrics, and W3C Trace Context in and out of the wire's
// traceparent and tracestate fields.
//
// Tracing is off unless an endpoint is configured: New then returns a
// Provider whose Tracer is nil, no exporter exists, and the engine and the
// transport start no span at all. The engine and the transport are handed a
// trace.Tracer (engine.Options.Tracer, rpc.Options.Tracer) and import only
// the OpenTelemetry API; cmd/car-server builds the Provider.
package tracing
