package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/parslee-ai/car-server/internal/tracing/tracingtest"
)

// examples/tracing/agent.mjs against the real daemon and Jaeger: the
// agent's span (exported by the agent itself, with the OpenTelemetry JS
// SDK) is the parent of the daemon's proposal span, and the agent's tool
// span, continued from tools.execute's _meta.traceparent, is the child of
// the daemon's execute_tool span: one trace across both processes.
func TestTracingExample(t *testing.T) {
	needTool(t, "nodejs (apt-get install nodejs npm)", "node")
	dir := filepath.Join("..", "..", "examples", "tracing")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@opentelemetry", "sdk-trace-base", "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the tracing example's packages are not installed (cd examples/tracing && npm ci): %v", err)
		}
		t.Skip("run cd examples/tracing && npm ci to run this example")
	}
	j := tracingtest.Start(t)
	d := startDaemon(t, t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT="+j.HTTP)
	cmd := example(d, "node", filepath.Join("examples", "tracing", "agent.mjs"))
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+j.HTTP)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent.mjs: %v\n%s", err, out)
	}
	wantLines(t, out, `price succeeded {"price":42.5,"symbol":"CAR"}`)
	m := regexp.MustCompile(`(?m)^trace ([0-9a-f]{32})$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("agent.mjs printed no trace id:\n%s", out)
	}
	traceID := string(m[1])

	spans := j.WaitTrace(t, traceID, func(s []tracingtest.Span) bool {
		return len(tracingtest.Named(s, "agent step")) == 1 && len(tracingtest.Named(s, "car.proposal")) == 1 &&
			len(tracingtest.Named(s, "execute_tool fetch_price")) == 1 && len(tracingtest.Named(s, "tool fetch_price")) == 1
	})
	step := tracingtest.Named(spans, "agent step")[0]
	prop := tracingtest.Named(spans, "car.proposal")[0]
	exec := tracingtest.Named(spans, "execute_tool fetch_price")[0]
	tool := tracingtest.Named(spans, "tool fetch_price")[0]
	if step.ParentSpanID != "" || step.ResourceAttr("service.name") != "car-agent-example" {
		t.Errorf("the agent's step: parent %q, service %q; want a root span of car-agent-example", step.ParentSpanID, step.ResourceAttr("service.name"))
	}
	if prop.ParentSpanID != step.SpanID || prop.ResourceAttr("service.name") != "car-server" {
		t.Errorf("the proposal span: parent %q (the agent's step is %s), service %q", prop.ParentSpanID, step.SpanID, prop.ResourceAttr("service.name"))
	}
	if exec.ParentSpanID != prop.SpanID {
		t.Errorf("execute_tool's parent is %q, want the proposal span %s", exec.ParentSpanID, prop.SpanID)
	}
	if tool.ParentSpanID != exec.SpanID || tool.ResourceAttr("service.name") != "car-agent-example" || tool.Attr("gen_ai.tool.call.id") != exec.Attr("gen_ai.tool.call.id") {
		t.Errorf("the agent's tool span: parent %q (execute_tool is %s), service %q, call id %q (execute_tool's %q)",
			tool.ParentSpanID, exec.SpanID, tool.ResourceAttr("service.name"), tool.Attr("gen_ai.tool.call.id"), exec.Attr("gen_ai.tool.call.id"))
	}
}
