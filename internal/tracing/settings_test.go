package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

func TestOffWithoutEndpoint(t *testing.T) {
	p, err := New(context.Background(), Settings{ServiceName: "x", Sampler: "nonsense"}, Resource{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if p.Tracer() != nil {
		t.Fatal("a tracer without an endpoint")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTarget(t *testing.T) {
	cases := []struct {
		s    Settings
		want string
	}{
		{Settings{Endpoint: "http://127.0.0.1:4318"}, "http/protobuf http://127.0.0.1:4318/v1/traces"},
		{Settings{Endpoint: "http://127.0.0.1:4318/base/"}, "http/protobuf http://127.0.0.1:4318/base/v1/traces"},
		{Settings{Endpoint: "http://127.0.0.1:4318", TracesEndpoint: "http://127.0.0.1:9/x"}, "http/protobuf http://127.0.0.1:9/x"},
		{Settings{Endpoint: "http://127.0.0.1:4317", Protocol: "grpc"}, "grpc http://127.0.0.1:4317"},
	}
	for _, c := range cases {
		tg, err := c.s.target()
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.protocol + " " + tg.url.String(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}

func TestCheckNamesTheSetting(t *testing.T) {
	on := "http://127.0.0.1:4318"
	cases := map[string]Settings{
		"otel_exporter_otlp_endpoint":        {Endpoint: "127.0.0.1:4318"},
		"otel_exporter_otlp_traces_endpoint": {TracesEndpoint: "ftp://x"},
		"otel_exporter_otlp_protocol":        {Endpoint: on, Protocol: "http/json"},
		"otel_exporter_otlp_headers":         {Endpoint: on, Headers: "api-key"},
		"otel_resource_attributes":           {Endpoint: on, ResourceAttributes: "=v"},
		"otel_traces_sampler":                {Endpoint: on, Sampler: "most"},
		"otel_traces_sampler_arg":            {Endpoint: on, Sampler: "traceidratio", SamplerArg: "1.5"},
		"otel_trace_queue_spans":             {Endpoint: on, QueueSpans: -1},
	}
	for key, s := range cases {
		var se *SettingError
		if err := s.Check(); !errors.As(err, &se) || se.Key != key {
			t.Errorf("%s: %v", key, err)
		}
	}
	if err := (Settings{Endpoint: on, Headers: "api-key=s3cret,x"}).Check(); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad header list must be refused without its values: %v", err)
	}
}

func TestResourceAndHeaders(t *testing.T) {
	s := Settings{ResourceAttributes: "deployment.environment=prod,team=a%20b,service.version=fake"}
	res, err := s.resource(Resource{Version: "1.2.3", NodeID: "n1", Home: "/h"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[attribute.Key]string{"service.name": "car-server", "service.version": "1.2.3", "car.node.id": "n1", "car.home": "/h", "deployment.environment": "prod", "team": "a b"}
	for k, v := range want {
		got, ok := res.Set().Value(k)
		if !ok || got.AsString() != v {
			t.Errorf("%s = %q, want %q", k, got.AsString(), v)
		}
	}
	pairs, err := parsePairs("Authorization=Bearer%20x, k=v", "otel_exporter_otlp_headers", "H")
	if err != nil || len(pairs) != 2 || pairs[0] != [2]string{"Authorization", "Bearer x"} || pairs[1] != [2]string{"k", "v"} {
		t.Fatalf("%v %v", pairs, err)
	}
}

func TestSamplers(t *testing.T) {
	for _, name := range []string{"", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"} {
		if _, err := (Settings{Sampler: name, SamplerArg: "0.5"}).sampler(); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func TestPropagation(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := Extract(context.Background(), tp, "car=1")
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsSampled() {
		t.Fatalf("extracted %+v", sc)
	}
	gotTP, gotTS := Inject(ctx)
	if gotTP != tp || gotTS != "car=1" {
		t.Fatalf("injected %q %q", gotTP, gotTS)
	}
	if sc := trace.SpanContextFromContext(Extract(context.Background(), "00-garbage", "")); sc.IsValid() {
		t.Fatal("a traceparent that does not parse gave a parent")
	}
	if tp, _ := Inject(context.Background()); tp != "" {
		t.Fatalf("no span, but traceparent %q", tp)
	}
}
