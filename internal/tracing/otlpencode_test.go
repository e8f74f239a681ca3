package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP endpoint on loopback that keeps each request's
// body and answers as status and body say.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	status  int
	answer  []byte
	ctype   string // the answer's Content-Type; "" is application/x-protobuf
}

func newCollector(t *testing.T) *collector {
	c := &collector{status: http.StatusOK}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.ContentLength != int64(len(b)) {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies, c.headers = append(c.bodies, b), append(c.headers, r.Header.Clone())
		status, answer, ctype := c.status, c.answer, c.ctype
		c.mu.Unlock()
		if ctype == "" {
			ctype = "application/x-protobuf"
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) requests() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bodies)
}

// sampleSpans ends spans with every kind of content OTLP carries: each
// attribute type, events and links with attributes, statuses, kinds, a
// remote parent with a tracestate, counts of what limits dropped, and two
// instrumentation scopes of one resource.
func sampleSpans(t *testing.T, res *resource.Resource) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit, limits.EventCountLimit, limits.LinkCountLimit, limits.AttributePerEventCountLimit = 12, 3, 2, 2
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits))
	ctx := context.Background()
	ts, err := trace.ParseTraceState("vendor=opaque,other=x")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	tr := tp.Tracer(Instrumentation)
	other := tp.Tracer("other", trace.WithInstrumentationVersion("1.2.3"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.40.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "s")))

	ctx, root := tr.Start(ctx, "car.proposal", trace.WithAttributes(
		attribute.String("car.proposal.id", "p-1"), attribute.String("empty", ""),
		attribute.Int("car.proposal.actions", 1000), attribute.Int64("negative", -42), attribute.Int64("zero", 0),
		attribute.Bool("t", true), attribute.Bool("f", false), attribute.Float64("car.cost.duration_ms", 12.5), attribute.Float64("nil.float", 0),
		attribute.StringSlice("ss", []string{"a", "", "é"}), attribute.IntSlice("is", []int{1, -2}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.Float64Slice("fs", []float64{0.5, -1}),
	), trace.WithLinks(
		trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("car.replaces.proposal_id", "p-0")}},
		trace.Link{SpanContext: remote}, trace.Link{SpanContext: remote}, // one past the limit
	))
	_, tool := tr.Start(ctx, "execute_tool noop", trace.WithSpanKind(trace.SpanKindClient))
	tool.AddEvent("retry", trace.WithAttributes(attribute.Int("car.tool.attempt", 1), attribute.String("car.tool.previous_error", "boom"), attribute.Bool("over", true)))
	tool.AddEvent("bare")
	tool.AddEvent("e3")
	tool.AddEvent("e4") // one past the limit
	tool.SetAttributes(attribute.String("error.type", "tool_error"))
	tool.SetStatus(codes.Error, "tool 'noop' failed")
	tool.End()
	for _, k := range []trace.SpanKind{trace.SpanKindServer, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindInternal} {
		_, s := other.Start(ctx, "kind "+k.String(), trace.WithSpanKind(k))
		s.SetStatus(codes.Ok, "")
		s.End()
	}
	root.End()
	_, lone := tr.Start(context.Background(), "no parent") // a root of its own, no tracestate
	lone.End()
	spans := rec.Ended()
	if len(spans) != 7 {
		t.Fatalf("recorded %d spans", len(spans))
	}
	if spans[len(spans)-2].DroppedAttributes() != 1 || spans[0].DroppedEvents() != 1 || spans[len(spans)-2].DroppedLinks() != 1 {
		t.Fatalf("the sample should drop one attribute, event and link: %d %d %d",
			spans[len(spans)-2].DroppedAttributes(), spans[0].DroppedEvents(), spans[len(spans)-2].DroppedLinks())
	}
	return spans
}

// sdkRequest is what the SDK's own OTLP/HTTP exporter sends for spans.
func sdkRequest(t *testing.T, spans []sdktrace.ReadOnlySpan) []byte {
	t.Helper()
	c := newCollector(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.URL+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got := c.requests()
	if len(got) != 1 {
		t.Fatalf("the SDK's exporter sent %d requests", len(got))
	}
	return got[0]
}

// ourRequest is what the daemon's exporter sends for spans.
func ourRequest(t *testing.T, spans []sdktrace.ReadOnlySpan) ([]byte, http.Header) {
	t.Helper()
	c := newCollector(t)
	u, _ := url.Parse(c.URL + "/v1/traces")
	exp := newHTTPExporter(u, map[string]string{"api-key": "k"})
	defer exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got := c.requests()
	if len(got) != 1 {
		t.Fatalf("the exporter sent %d requests", len(got))
	}
	return got[0], c.headers[0]
}

func decodeRequest(t *testing.T, b []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("not an OTLP request: %v", err)
	}
	return &req
}

func TestTheExporterSendsTheBytesTheSDKExporterSends(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "car-server"), attribute.String("car.node.id", "n1"))
	spans := sampleSpans(t, res)
	want := sdkRequest(t, spans)
	got, headers := ourRequest(t, spans)
	if !proto.Equal(decodeRequest(t, got), decodeRequest(t, want)) {
		t.Fatalf("decoded requests differ:\nours %v\nSDK  %v", decodeRequest(t, got), decodeRequest(t, want))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("same spans, different bytes (%d against the SDK's %d)", len(got), len(want))
	}
	if len(decodeRequest(t, got).ResourceSpans[0].ScopeSpans) != 2 {
		t.Fatal("the sample should have two scopes")
	}
	if headers.Get("Content-Type") != "application/x-protobuf" || headers.Get("Api-Key") != "k" {
		t.Fatalf("headers %v", headers)
	}
}

func TestTheExporterGroupsSpansByResourceAsTheSDKExporterDoes(t *testing.T) {
	a := sampleSpans(t, resource.NewSchemaless(attribute.String("service.name", "a")))
	b := sampleSpans(t, resource.NewWithAttributes("https://opentelemetry.io/schemas/1.40.0", attribute.String("service.name", "b")))
	spans := append(append([]sdktrace.ReadOnlySpan{a[0]}, b...), a[1:]...) // interleaved
	want, got := decodeRequest(t, sdkRequest(t, spans)), decodeRequest(t, ourRequest2(t, spans))
	if len(got.ResourceSpans) != 2 || len(want.ResourceSpans) != 2 {
		t.Fatalf("resource spans: ours %d, the SDK's %d", len(got.ResourceSpans), len(want.ResourceSpans))
	}
	// The SDK's exporter orders resources as a map iterates; ours as they come.
	if !proto.Equal(got.ResourceSpans[0], want.ResourceSpans[0]) {
		want.ResourceSpans[0], want.ResourceSpans[1] = want.ResourceSpans[1], want.ResourceSpans[0]
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded requests differ:\nours %v\nSDK  %v", got, want)
	}
}

func ourRequest2(t *testing.T, spans []sdktrace.ReadOnlySpan) []byte {
	b, _ := ourRequest(t, spans)
	return b
}

func TestALongMessageMovesToFitItsLength(t *testing.T) {
	// Lengths of one, two and three varint bytes, around each boundary.
	for _, n := range []int{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 16385, 70000} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		_, s := tp.Tracer("t").Start(context.Background(), strings.Repeat("x", n))
		s.End()
		if got, want := ourRequest2(t, rec.Ended()), sdkRequest(t, rec.Ended()); !bytes.Equal(got, want) {
			t.Fatalf("a name of %d bytes: different bytes", n)
		}
	}
}

func TestTheExporterReportsWhatTheCollectorRefused(t *testing.T) {
	spans := sampleSpans(t, resource.Empty())
	c := newCollector(t)
	u, _ := url.Parse(c.URL + "/v1/traces")
	exp := newHTTPExporter(u, nil)
	defer exp.Shutdown(context.Background())

	c.status, c.answer = http.StatusServiceUnavailable, []byte("busy")
	err := exp.ExportSpans(context.Background(), spans)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a 503 gave %v", err)
	}

	partial, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "too old"}})
	c.status, c.answer = http.StatusOK, partial
	if err := exp.ExportSpans(context.Background(), spans); err == nil || !strings.Contains(err.Error(), "rejected 3 spans: too old") {
		t.Fatalf("a partial success gave %v", err)
	}

	c.ctype = "application/x-protobuf; charset=binary"
	if err := exp.ExportSpans(context.Background(), spans); err == nil || !strings.Contains(err.Error(), "rejected 3 spans: too old") {
		t.Fatalf("a partial success with a Content-Type parameter gave %v", err)
	}
	c.ctype = ""

	empty, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	c.answer = empty
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("a full success gave %v", err)
	}

	c.Close()
	if err := exp.ExportSpans(context.Background(), spans); err == nil {
		t.Fatal("a closed collector gave no error")
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spans); err == nil {
		t.Fatal("an export after shutdown gave no error")
	}
}

func TestTheExporterHonoursItsDeadline(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }))
	defer srv.Close()
	defer close(hold)
	u, _ := url.Parse(srv.URL + "/v1/traces")
	exp := newHTTPExporter(u, nil)
	defer exp.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := exp.ExportSpans(ctx, sampleSpans(t, resource.Empty())); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a collector that never answers gave %v", err)
	}
}

// BenchmarkAppendExportRequest encodes a batch of 512 spans shaped like a
// proposal's execute_tool spans.
func BenchmarkAppendExportRequest(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "car-server"), attribute.String("service.version", "bench"))))
	ctx, root := tp.Tracer(Instrumentation).Start(context.Background(), "car.proposal")
	for i := range 512 {
		_, s := tp.Tracer(Instrumentation).Start(ctx, "execute_tool noop", trace.WithSpanKind(trace.SpanKindClient))
		s.SetAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "noop"),
			attribute.String("car.proposal.id", "8d3f0c0e-2a4b-4c6e-9f1a-0b2c3d4e5f60"), attribute.String("car.action.id", "a"+strings.Repeat("1", i%4)),
			attribute.String("car.tool.tier", "read_only"), attribute.Bool("car.tool.idempotent", false), attribute.String("car.tool.cache_hit", ""),
			attribute.Int("car.tool.attempts", 1), attribute.String("gen_ai.tool.call.id", "c7-a1-1"))
		s.End()
	}
	root.End()
	spans := rec.Ended()[:512]
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = appendExportRequest(buf[:0], spans)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	b.SetBytes(int64(len(buf)))
}

// The exporter reuses its buffer once the transport has closed the last
// body over it, and each request still carries its own spans.
func TestTheExporterReusesItsBufferOnlyWhenTheTransportIsDone(t *testing.T) {
	all := sampleSpans(t, resource.Empty())
	batches := [][]sdktrace.ReadOnlySpan{all, all[:2], all[3:]}
	c := newCollector(t)
	u, _ := url.Parse(c.URL + "/v1/traces")
	exp := newHTTPExporter(u, nil)
	defer exp.Shutdown(context.Background())
	var first *byte
	for i, batch := range batches {
		if err := exp.ExportSpans(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		if exp.open.Load() != 0 {
			t.Fatalf("batch %d: %d bodies left open after the answer", i, exp.open.Load())
		}
		if i == 0 {
			first = &exp.buf[:1][0]
		} else if &exp.buf[:1][0] != first {
			t.Fatalf("batch %d: a new buffer though the transport was done with the last", i)
		}
	}
	got := c.requests()
	for i, batch := range batches {
		if want := sdkRequest(t, batch); !bytes.Equal(got[i], want) {
			t.Fatalf("request %d is not its own spans' encoding", i)
		}
	}
	// A body still held by the transport: the next export writes elsewhere.
	held := exp.open
	held.Add(1)
	before := &exp.buf[:1][0]
	if err := exp.ExportSpans(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	if &exp.buf[:1][0] == before || exp.open == held {
		t.Fatal("the buffer of a body still open was written over")
	}
}

// With an OTLP variable set that the daemon's own encoder does not read
// (compression here), the SDK's exporter sends the spans and honours it;
// without one, the daemon's encoder sends them, uncompressed.
func TestAnOTLPVariableOurEncoderDoesNotReadGoesToTheSDKExporter(t *testing.T) {
	for _, gzip := range []bool{false, true} {
		got := make(chan string, 16)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			got <- r.Header.Get("Content-Encoding") + "|" + r.Header.Get("User-Agent")
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		if gzip {
			t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
		}
		p, err := New(context.Background(), Settings{Endpoint: srv.URL}, Resource{Version: "t"}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		_, span := p.Tracer().Start(context.Background(), "s")
		span.End()
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var h string
		select {
		case h = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("no export reached the collector")
		}
		encoding, agent, _ := strings.Cut(h, "|")
		if gzip && (encoding != "gzip" || agent == exporterUserAgent) {
			t.Errorf("with OTEL_EXPORTER_OTLP_COMPRESSION=gzip: Content-Encoding %q, User-Agent %q; want gzip from the SDK's exporter", encoding, agent)
		}
		if !gzip && (encoding != "" || agent != exporterUserAgent) {
			t.Errorf("with no such variable: Content-Encoding %q, User-Agent %q; want none from the daemon's encoder", encoding, agent)
		}
		p.Shutdown(context.Background())
		srv.Close()
	}
}
