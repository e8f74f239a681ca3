package connectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/tracing"
)

// toolExec runs one enabled tool of a connector: the engine's executor for
// mcp_<slug>_<tool>, called once every gate has passed.
type toolExec struct {
	c    *connector
	tool string
}

// maxErrorText bounds the text of an isError result that becomes the
// action's error.
const maxErrorText = 4096

// ExecuteTool sends tools/call under ctx, which carries the action's
// timeout: when ctx ends first (timeout, proposal.cancel, shutdown) the SDK
// sends notifications/cancelled for the request. With tracing on, the
// request's _meta carries the execute_tool span's traceparent (and
// tracestate), as MCP carries W3C Trace Context, so the server's own span
// joins the trace; an idempotent call carries its fencing token in
// _meta.fence ({key, epoch}). The output is the
// CallToolResult as JSON (content, and structuredContent when the server
// sent it); isError fails the call with the text content as its error.
func (e *toolExec) ExecuteTool(ctx context.Context, call engine.ToolCall) (any, error) {
	cs, why := e.c.session()
	if cs == nil {
		return nil, fmt.Errorf("connector '%s' is disconnected (%s); the daemon reconnects it with backoff, connectors.list shows when it is back", e.c.slug, why)
	}
	params := &mcp.CallToolParams{Name: e.tool, Arguments: call.Parameters}
	if tp, ts := tracing.Inject(ctx); tp != "" {
		params.Meta = traceMeta(tp, ts)
	}
	if call.Fence != nil {
		// An idempotent call's fencing token, for a server that fences.
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta["fence"] = call.Fence
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, fmt.Errorf("connector '%s' tool '%s' was cancelled (notifications/cancelled sent): %w", e.c.slug, e.tool, cause)
		}
		e.c.mu.Lock()
		large := e.c.tooLarge
		e.c.mu.Unlock()
		if large || errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("connector '%s' tool '%s' sent a result of more than %d bytes (mcp_max_result_bytes); the connection was closed and is reconnecting", e.c.slug, e.tool, e.c.m.opts.MaxResultBytes)
		}
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("connector '%s' tool '%s': the server sent malformed JSON-RPC (%v); the connection was closed and is reconnecting", e.c.slug, e.tool, syntax)
		}
		return nil, fmt.Errorf("connector '%s' tool '%s': tools/call failed: %w", e.c.slug, e.tool, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("connector '%s' tool '%s' answered isError: %s", e.c.slug, e.tool, errorText(res))
	}
	out := map[string]any{"content": res.Content}
	if res.Content == nil {
		out["content"] = []mcp.Content{}
	}
	if res.StructuredContent != nil {
		out["structuredContent"] = res.StructuredContent
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("connector '%s' tool '%s': its result cannot be encoded: %w", e.c.slug, e.tool, err)
	}
	if int64(len(raw)) > e.c.m.opts.MaxResultBytes {
		return nil, fmt.Errorf("connector '%s' tool '%s' returned %d bytes, over mcp_max_result_bytes (%d): ask for less, or raise mcp_max_result_bytes", e.c.slug, e.tool, len(raw), e.c.m.opts.MaxResultBytes)
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("connector '%s' tool '%s': its result cannot be decoded: %w", e.c.slug, e.tool, err)
	}
	return v, nil
}

// traceMeta is the _meta of a traced tools/call.
func traceMeta(traceparent, tracestate string) mcp.Meta {
	m := mcp.Meta{tracing.TraceparentKey: traceparent}
	if tracestate != "" {
		m[tracing.TracestateKey] = tracestate
	}
	return m
}

// errorText is the text content of an isError result, bounded.
func errorText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	s := strings.Join(parts, "\n")
	if s == "" {
		return "(no text content)"
	}
	if len(s) > maxErrorText {
		s = strings.ToValidUTF8(s[:maxErrorText], "") + "…"
	}
	return s
}

func jsonMarshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
