package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Instrumentation is the name of the daemon's tracer.
const Instrumentation = "github.com/parslee-ai/car-server"

// Resource is what the daemon says of itself on every span.
type Resource struct {
	Version string // service.version
	NodeID  string // car.node.id: the member id of this daemon
	Home    string // car.home: its state root
}

// Provider is the daemon's trace pipeline. The zero Provider, and the one
// New returns for settings without an endpoint, is off: Tracer is nil.
type Provider struct {
	sdk   *sdktrace.TracerProvider
	queue *queue
}

// New builds the pipeline the settings describe; off without an endpoint.
// Nothing is dialled here: the exporter connects on its first export.
func New(ctx context.Context, s Settings, r Resource, log *zap.Logger) (*Provider, error) {
	if !s.Enabled() {
		return &Provider{}, nil
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	tg, _ := s.target()
	headers, _ := parsePairs(s.Headers, "", "")
	hm := make(map[string]string, len(headers))
	for _, h := range headers {
		hm[h[0]] = h[1]
	}
	var exp sdktrace.SpanExporter
	var err error
	switch tg.protocol {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(tg.url.String()), otlptracegrpc.WithHeaders(hm),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithTimeout(exportTimeout)}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		if set := sdkExporterVariables(); len(set) > 0 {
			// Our encoder reads none of these: the SDK's exporter does.
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(tg.url.String()), otlptracehttp.WithHeaders(hm),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), otlptracehttp.WithTimeout(exportTimeout)}
			exp, err = otlptracehttp.New(ctx, opts...)
			log.Info("tracing: spans go through the OpenTelemetry SDK's OTLP/HTTP exporter, which reads the variables set", zap.Strings("variables", set))
			break
		}
		// Our own encoder: the SDK's otlptracehttp exporter builds a
		// protobuf object per span, attribute and value before it encodes
		// them, which cost more than the spans (docs/tracing.md, Cost).
		exp = newHTTPExporter(tg.url, hm)
	}
	if err != nil {
		return nil, fmt.Errorf("trace exporter (%s to %s): %w", tg.protocol, tg.url.Redacted(), err)
	}
	res, err := s.resource(r)
	if err != nil {
		return nil, err
	}
	sampler, _ := s.sampler()
	size := s.QueueSpans
	if size <= 0 {
		size = DefaultQueueSpans
	}
	q := newQueue(exp, size, log)
	sdk := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(q))
	return &Provider{sdk: sdk, queue: q}, nil
}

// sdkVariables are the OTLP exporter variables the daemon's own
// OTLP/HTTP encoder does not read (TLS files and compression): with any of
// them set, the SDK's exporter, which reads them, sends the spans instead.
var sdkVariables = []string{
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
}

// sdkExporterVariables names those of sdkVariables set in the environment.
func sdkExporterVariables() []string {
	var set []string
	for _, name := range sdkVariables {
		if os.Getenv(name) != "" {
			set = append(set, name)
		}
	}
	return set
}

// resource is the daemon's resource: OTEL_RESOURCE_ATTRIBUTES, then the
// service name, version, node id and home, which win.
func (s Settings) resource(r Resource) (*resource.Resource, error) {
	kvs, err := s.resourceAttributes()
	if err != nil {
		return nil, err
	}
	name := s.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	kvs = append(kvs, attribute.String("service.name", name), attribute.String("service.version", r.Version))
	if r.NodeID != "" {
		kvs = append(kvs, attribute.String("car.node.id", r.NodeID))
	}
	if r.Home != "" {
		kvs = append(kvs, attribute.String("car.home", r.Home))
	}
	return resource.NewSchemaless(kvs...), nil
}

// Tracer is the daemon's tracer, nil when tracing is off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Tracer(Instrumentation)
}

// Flush exports every ended span, waiting at most until ctx ends.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown exports what is queued and stops, waiting at most until ctx
// ends: an unreachable collector costs shutdown no more than that.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Dropped is how many spans this provider dropped, and Exported how many
// it delivered.
func (p *Provider) Dropped() int64 {
	if p == nil || p.queue == nil {
		return 0
	}
	return p.queue.dropped.Load()
}

// Exported is how many spans this provider delivered.
func (p *Provider) Exported() int64 {
	if p == nil || p.queue == nil {
		return 0
	}
	return p.queue.exported.Load()
}
