package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/host"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/internal/tracing/tracingtest"
	"github.com/parslee-ai/car-server/protocol"
)

// randomHex is n random bytes in hex: a trace or span id.
func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// executeSeen is what the client saw of one tools.execute.
type executeSeen struct {
	Tool      string             `json:"tool"`
	RequestID string             `json:"request_id"`
	Meta      protocol.TraceMeta `json:"_meta"`
}

// A proposal submitted with the agent's traceparent, parked for a person,
// approved, with one tool call that succeeds and one that fails twice: the
// daemon's spans, read back from Jaeger, hang under the agent's span, the
// approval wait covers the time the person took, and each tools.execute
// carried its span's traceparent.
func TestTheSpanTreeOfAProposalInJaeger(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(proto, "/", "_"), func(t *testing.T) { spanTreeInJaeger(t, proto) })
	}
}

func spanTreeInJaeger(t *testing.T, proto string) {
	j := tracingtest.Start(t)
	endpoint := j.HTTP
	if proto == "grpc" {
		endpoint = j.GRPC
	}
	home := t.TempDir()
	d := startDaemon(t, home, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=test", "CAR_LOG_LEVEL=debug")
	person := d.dial(t)
	defer person.Close()
	if err := person.Call(ctxT(t), protocol.MethodHostSubscribe, nil, nil); err != nil {
		t.Fatal(err)
	}
	runner := d.dial(t)
	defer runner.Close()
	var mu sync.Mutex
	calls := map[string][]executeSeen{}
	runner.HandleRequest(protocol.MethodToolsExecute, func(_ context.Context, params json.RawMessage) (any, error) {
		var c executeSeen
		if err := json.Unmarshal(params, &c); err != nil {
			return nil, err
		}
		mu.Lock()
		calls[c.Tool] = append(calls[c.Tool], c)
		mu.Unlock()
		if c.Tool == "flaky_disk" {
			return nil, errors.New("the disk is full")
		}
		return map[string]any{"deployed": true}, nil
	})
	if err := runner.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "deploy_service"}, {Name: "flaky_disk"}}, nil); err != nil {
		t.Fatal(err)
	}

	var run protocol.RunsStartResult
	if err := runner.Call(ctxT(t), protocol.MethodRunsStart, protocol.RunsStartParams{Intent: "ship the service", AgentName: "deployer"}, &run); err != nil {
		t.Fatal(err)
	}

	traceID, agentSpan := randomHex(t, 16), randomHex(t, 8)
	done := make(chan error, 1)
	var res protocol.ProposalResult
	go func() {
		done <- runner.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{
			"_meta": map[string]any{"traceparent": "00-" + traceID + "-" + agentSpan + "-01", "tracestate": "agent=7"},
			"proposal": map[string]any{"id": "traced", "actions": []any{
				map[string]any{"id": "ship", "type": "tool_call", "tool": "deploy_service", "parameters": map[string]any{"env": "prod"}},
				map[string]any{"id": "disk", "type": "tool_call", "tool": "flaky_disk", "failure_behavior": "retry", "max_retries": 1},
			}},
		}, &res)
	}()
	var waiting host.Approval
	testwait.Eventually(t, waitLimit, "the proposal's approval request", func() bool {
		var list protocol.HostApprovalsResult
		if err := person.Call(ctxT(t), protocol.MethodHostApprovals, nil, &list); err != nil || len(list.Approvals) == 0 {
			return false
		}
		waiting = list.Approvals[0]
		return true
	})
	// The request is pending from when it was seen until the approval is
	// sent (the wait may end before the approval's own reply arrives, so
	// that reply's round trip is no part of the lower bound): hold it a
	// moment so the bound is not only a clock's tick.
	seen := time.Now()
	time.Sleep(50 * time.Millisecond)
	waited := time.Since(seen)
	if err := person.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": waiting.ID, "approved": true}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the proposal did not finish after the approval")
	}
	if r, _ := res.Result("ship"); r.Status != protocol.StatusSucceeded {
		t.Fatalf("ship: %+v", r)
	}
	if r, _ := res.Result("disk"); r.Status != protocol.StatusFailed {
		t.Fatalf("disk: %+v", r)
	}

	spans := j.WaitTrace(t, traceID, func(s []tracingtest.Span) bool {
		return len(tracingtest.Named(s, "car.proposal")) == 1 && len(tracingtest.Named(s, "car.approval.wait")) == 1 &&
			len(tracingtest.Named(s, "execute_tool deploy_service")) == 1 && len(tracingtest.Named(s, "execute_tool flaky_disk")) == 1 &&
			len(tracingtest.Named(s, "car.gate permission")) == 1
	})
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.TraceID != traceID {
			t.Errorf("span %s is in trace %s, not the agent's %s", s.Name, s.TraceID, traceID)
		}
	}
	prop := tracingtest.Named(spans, "car.proposal")[0]
	if prop.ParentSpanID != agentSpan {
		t.Errorf("the proposal span's parent is %q, want the agent's span %s", prop.ParentSpanID, agentSpan)
	}
	// The request's log line names the proposal's span.
	if _, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool {
		return l["method"] == protocol.MethodProposalSubmit && l["trace_id"] == traceID && l["span_id"] == prop.SpanID
	}); err != nil {
		t.Errorf("no log line of the proposal.submit request with trace_id %s and span_id %s: %v", traceID, prop.SpanID, err)
	}
	for k, want := range map[string]string{
		"car.proposal.id": "traced", "car.proposal.actions": "2", "car.proposal.status": "failed", "car.cost.tool_calls": "3",
	} {
		if got := prop.Attr(k); got != want {
			t.Errorf("proposal %s = %q, want %q", k, got, want)
		}
	}
	if prop.Attr("car.run.id") != run.RunID {
		t.Errorf("the proposal span's car.run.id is %q, want the connection's run %s", prop.Attr("car.run.id"), run.RunID)
	}
	if prop.Attr("car.client") == "" {
		t.Error("the proposal span does not name its plain client")
	}
	for k, want := range map[string]string{"service.name": "car-server", "car.home": home, "deployment.environment": "test"} {
		if got := prop.ResourceAttr(k); got != want {
			t.Errorf("resource %s = %q, want %q", k, got, want)
		}
	}
	if prop.ResourceAttr("service.version") == "" || prop.ResourceAttr("car.node.id") == "" {
		t.Error("the resource lacks service.version or car.node.id")
	}

	gates := 0
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "car.gate ") {
			continue
		}
		gates++
		if s.ParentSpanID != prop.SpanID || s.Attr("car.gate.verdict") != "admit" || s.Attr("car.gate.name") != strings.TrimPrefix(s.Name, "car.gate ") {
			t.Errorf("gate span %s: parent %s, verdict %q", s.Name, s.ParentSpanID, s.Attr("car.gate.verdict"))
		}
	}
	if gates < 5 {
		t.Errorf("%d gate spans; policy, capability, flow, permission and supervision each ran", gates)
	}

	wait := tracingtest.Named(spans, "car.approval.wait")[0]
	if parent := byID[wait.ParentSpanID]; parent.Name != "car.gate permission" {
		t.Errorf("the approval wait's parent is %q, want the permission gate", parent.Name)
	}
	fp, _ := waiting.Context["fingerprint"].(string)
	for k, want := range map[string]string{
		"car.approval.id": waiting.ID, "car.approval.fingerprint": fp, "car.approval.decision": "approved", "car.action.id": "ship", "gen_ai.tool.name": "deploy_service",
	} {
		if got := wait.Attr(k); got != want {
			t.Errorf("approval wait %s = %q, want %q", k, got, want)
		}
	}
	if wait.Attr("car.approval.required_tier") == "" || !strings.HasPrefix(wait.Attr("car.approval.reviewer"), "conn:") {
		t.Errorf("approval wait: tier %q reviewer %q", wait.Attr("car.approval.required_tier"), wait.Attr("car.approval.reviewer"))
	}
	if wait.Duration() < waited {
		t.Errorf("the approval wait lasted %s, less than the %s the request was pending in this test", wait.Duration(), waited)
	}

	mu.Lock()
	defer mu.Unlock()
	ship := tracingtest.Named(spans, "execute_tool deploy_service")[0]
	disk := tracingtest.Named(spans, "execute_tool flaky_disk")[0]
	for _, s := range []tracingtest.Span{ship, disk} {
		if s.ParentSpanID != prop.SpanID || s.Attr("gen_ai.operation.name") != "execute_tool" || s.Kind != 3 || s.Attr("car.run.id") != run.RunID {
			t.Errorf("%s: parent %s, operation %q, kind %d, run %q", s.Name, s.ParentSpanID, s.Attr("gen_ai.operation.name"), s.Kind, s.Attr("car.run.id"))
		}
		tool := s.Attr("gen_ai.tool.name")
		cs := calls[tool]
		if len(cs) == 0 {
			t.Fatalf("no tools.execute of %s", tool)
		}
		last := cs[len(cs)-1]
		if want := "00-" + traceID + "-" + s.SpanID + "-01"; last.Meta.Traceparent != want || last.Meta.Tracestate != "agent=7" {
			t.Errorf("tools.execute of %s carried _meta %+v, want traceparent %s", tool, last.Meta, want)
		}
		if s.Attr("gen_ai.tool.call.id") != last.RequestID {
			t.Errorf("%s: gen_ai.tool.call.id %q, the request was %q", tool, s.Attr("gen_ai.tool.call.id"), last.RequestID)
		}
	}
	if ship.Status.Code == 2 || ship.Attr("car.tool.attempts") != "1" {
		t.Errorf("deploy_service: status %+v attempts %q", ship.Status, ship.Attr("car.tool.attempts"))
	}
	if disk.Status.Code != 2 || !strings.Contains(disk.Status.Message, "the disk is full") || disk.Attr("error.type") != "tool_error" || disk.Attr("car.tool.attempts") != "2" {
		t.Errorf("flaky_disk: status %+v, error.type %q, attempts %q", disk.Status, disk.Attr("error.type"), disk.Attr("car.tool.attempts"))
	}
	if len(disk.Events) != 1 || disk.Events[0].Name != "retry" {
		t.Errorf("flaky_disk events %+v, want one retry", disk.Events)
	}
}

// metric reads one sample of the daemon's /metrics ("" when absent).
func metric(t *testing.T, d *daemon, sample string) string {
	t.Helper()
	noKeepAlive := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := noKeepAlive.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			return v
		}
	}
	return ""
}

// With the collector unreachable, proposals run as they would without
// tracing: every action succeeds, the spans that could not be delivered
// are counted in /metrics, and the daemon warns.
func TestAnUnreachableCollectorNeverFailsAProposal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: every export is refused
	d := startDaemon(t, t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT="+gone)
	if line, _, err := d.logs.waitFor(ctxT(t), 0, func(l map[string]any) bool { return l["msg"] == "tracing on: spans are exported over OTLP" }); err != nil || line["endpoint"] != gone {
		t.Fatalf("no log line saying tracing is on, to %s: %v %v", gone, line, err)
	}
	c := d.dial(t)
	defer c.Close()
	c.HandleRequest(protocol.MethodToolsExecute, func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	if err := c.Call(ctxT(t), protocol.MethodToolsRegister, []protocol.ToolSchema{{Name: "echo"}}, nil); err != nil {
		t.Fatal(err)
	}
	const n = 50
	actions := make([]any, n)
	for i := range actions {
		actions[i] = map[string]any{"id": "a" + strconv.Itoa(i), "type": "tool_call", "tool": "echo"}
	}
	var res protocol.ProposalResult
	if err := c.Call(ctxT(t), protocol.MethodProposalSubmit, map[string]any{"proposal": map[string]any{"actions": actions}}, &res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Status != protocol.StatusSucceeded {
			t.Fatalf("%s: %s %s", r.ActionID, r.Status, r.ErrorText())
		}
	}
	if len(res.Results) != n {
		t.Fatalf("%d results", len(res.Results))
	}
	d.waitLog(t, "trace spans dropped: the collector is slow or unreachable; proposals are not affected (car_trace_spans_dropped_total counts them)")
	var dropped float64
	testwait.Eventually(t, waitLimit, "the proposal's spans counted as dropped", func() bool {
		v, err := strconv.ParseFloat(metric(t, d, `car_trace_spans_dropped_total{reason="export_failed"}`), 64)
		dropped = v
		return err == nil && v >= n+1 // the tool calls, the proposal and its gates
	})
	if v := metric(t, d, "car_trace_spans_exported_total"); v != "0" {
		t.Fatalf("exported %s spans to nowhere (dropped %v)", v, dropped)
	}
}
