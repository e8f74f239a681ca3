package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parslee-ai/car-server/internal/tracing/tracingtest"
	"github.com/parslee-ai/car-server/protocol"
)

// bearer adds a bearer token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// An MCP client's call through the daemon's MCP endpoint to an MCP
// connector's tool, both ends the official Go SDK over Streamable HTTP: the
// proposal span is a child of the span the client named in the request's
// _meta, and the connector's MCP server receives the execute_tool span's
// traceparent in its own request's _meta. With otel_capture_tool_arguments
// the call's arguments are on its span, redacted.
func TestMCPCallsCarryTheTraceBothWays(t *testing.T) {
	j := tracingtest.Start(t)
	// The connector: an MCP server that answers with the _meta it got.
	got := make(chan mcp.Meta, 1)
	server := mcp.NewServer(&mcp.Implementation{Name: "stamps", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "stamp", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case got <- req.Params.Meta:
			default:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stamped"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(hs.Close) // after the daemon's end, which ends its session

	d := startDaemon(t, t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT="+j.HTTP, "CAR_OTEL_CAPTURE_TOOL_ARGUMENTS=true")
	if d.mcpAddr == "" {
		t.Fatal("the daemon logged no mcp_addr")
	}

	person := d.dial(t)
	defer person.Close()
	var st protocol.ConnectorStatus
	if err := person.Call(ctxT(t), protocol.MethodConnectorsAdd, protocol.ConnectorsAddParams{Name: "stamps", URL: hs.URL}, &st); err != nil || !st.Connected {
		t.Fatalf("connectors.add: %+v %v", st, err)
	}
	if err := person.Call(ctxT(t), protocol.MethodConnectorsEnableTools, protocol.ConnectorToolsParams{Slug: "stamps", Tools: []string{"stamp"}}, nil); err != nil {
		t.Fatal(err)
	}

	// The agent: an MCP client of the daemon's endpoint.
	c := mcp.NewClient(&mcp.Implementation{Name: "traced-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: "http://" + d.mcpAddr + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: d.token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	traceID, agentSpan := randomHex(t, 16), randomHex(t, 8)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "mcp_stamps_stamp", Arguments: map[string]any{"note": "hi", "authorization": "Bearer do-not-trace"},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + agentSpan + "-01", "tracestate": "agent=mcp"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %+v %v", res, err)
	}
	var meta mcp.Meta
	select {
	case meta = <-got:
	default:
		t.Fatal("the connector's server answered no call")
	}

	spans := j.WaitTrace(t, traceID, func(s []tracingtest.Span) bool {
		return len(tracingtest.Named(s, "car.proposal")) == 1 && len(tracingtest.Named(s, "execute_tool mcp_stamps_stamp")) == 1
	})
	prop := tracingtest.Named(spans, "car.proposal")[0]
	if prop.ParentSpanID != agentSpan {
		t.Errorf("the MCP call's proposal span has parent %q, want the client's span %s", prop.ParentSpanID, agentSpan)
	}
	exec := tracingtest.Named(spans, "execute_tool mcp_stamps_stamp")[0]
	if exec.ParentSpanID != prop.SpanID || exec.Attr("gen_ai.tool.name") != "mcp_stamps_stamp" {
		t.Errorf("execute_tool: parent %s (proposal %s), tool %q", exec.ParentSpanID, prop.SpanID, exec.Attr("gen_ai.tool.name"))
	}
	// The operator opted in to arguments on spans: they are there, redacted.
	if got := exec.Attr("gen_ai.tool.call.arguments"); got != `{"authorization":"[redacted]","note":"hi"}` {
		t.Errorf("execute_tool's gen_ai.tool.call.arguments is %q, want the redacted preview", got)
	}
	if want := "00-" + traceID + "-" + exec.SpanID + "-01"; meta["traceparent"] != want || meta["tracestate"] != "agent=mcp" {
		t.Errorf("the connector's server got _meta %v, want traceparent %s and the client's tracestate", meta, want)
	}
}
