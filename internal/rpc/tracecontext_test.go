package rpc

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A request names its caller's span in params._meta, as MCP carries it, or
// as top-level members; _meta wins, and anything else names no parent.
func TestClientTraceContext(t *testing.T) {
	const (
		metaTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		topTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	cases := []struct {
		params, wantSpan, wantState string
	}{
		{`{"proposal":{},"_meta":{"traceparent":"` + metaTP + `","tracestate":"a=1","progressToken":7}}`, "00f067aa0ba902b7", "a=1"},
		{`{"traceparent":"` + topTP + `","tracestate":"b=2","proposal":{}}`, "b7ad6b7169203331", "b=2"},
		{`{"traceparent":"` + topTP + `","_meta":{"traceparent":"` + metaTP + `"}}`, "00f067aa0ba902b7", ""},
		{`{"_meta":"not an object","traceparent":"` + topTP + `"}`, "b7ad6b7169203331", ""},
		{`{"traceparent":"00-zz-yy-01"}`, "", ""},
		{`{"traceparent":7}`, "", ""},
		{`[1,2]`, "", ""},
		{`{}`, "", ""},
	}
	for _, c := range cases {
		raw := json.RawMessage(c.params)
		sc := trace.SpanContextFromContext(clientTraceContext(context.Background(), &raw))
		if c.wantSpan == "" {
			if sc.IsValid() {
				t.Errorf("%s: a parent %v", c.params, sc)
			}
			continue
		}
		if !sc.IsValid() || !sc.IsRemote() || sc.SpanID().String() != c.wantSpan || sc.TraceState().String() != c.wantState {
			t.Errorf("%s: parent %s state %q, want %s %q", c.params, sc.SpanID(), sc.TraceState().String(), c.wantSpan, c.wantState)
		}
	}
	if sc := trace.SpanContextFromContext(clientTraceContext(context.Background(), nil)); sc.IsValid() {
		t.Error("no params, but a parent")
	}
}
