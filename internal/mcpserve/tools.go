package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/rpc"
	"github.com/parslee-ai/car-server/internal/tracing"
)

// TierMetaKey is the _meta key of a listed tool that holds car-server's
// classification of it (read_only, sandbox_edit, full_access): the tier a
// call starts at, before its parameters raise it. The SDK's annotations
// type has no room for a field of the daemon's own, and _meta is where MCP
// puts what an implementation adds.
const TierMetaKey = "car-server/tier"

// IdempotencyKeyMetaKey is the _meta key of a tools/call that names its
// idempotency key: a repeat with the same key (by the same principal, of
// the same tool) is answered with the first result instead of running.
const IdempotencyKeyMetaKey = "car-server/idempotency_key"

// CodeLimit is the JSON-RPC error of a call over a bound.
const CodeLimit = -32000

// middleware answers tools/list and tools/call for the session's
// principal; every other method is the SDK's.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && method == "initialize" {
			// The session's first request: the daemon's session opens
			// under its principal, if the principal has room.
			client := ""
			if ip != nil && ip.ClientInfo != nil {
				client = ip.ClientInfo.Name
			}
			if err := s.open(ctx, ss, req.GetExtra(), client); err != nil {
				return nil, err
			}
			return next(ctx, method, req)
		}
		se, err := s.lookup(ctx, ss, req.GetExtra())
		if err != nil {
			return nil, err
		}
		if se == nil {
			// Not initialized (the SDK refuses what needs it), or a
			// request the SDK serves before initialize.
			switch method {
			case "tools/list", "tools/call":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this MCP session is not initialized: send initialize first"}
			}
			return next(ctx, method, req)
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return s.listTools(se), nil
		case *mcp.CallToolRequest:
			return s.callTool(ctx, se, r)
		}
		return next(ctx, method, req)
	}
}

// listTools is what the principal may call (rpc.MCPSession.Tools), with
// the provider's annotations and the daemon's tier.
func (s *Server) listTools(se *session) *mcp.ListToolsResult {
	tools := se.rpc.Tools()
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(tools))}
	for _, t := range tools {
		mt := &mcp.Tool{
			Name:        t.Schema.Name,
			Description: t.Schema.Description,
			InputSchema: rawSchema(t.Schema.Parameters),
			Meta:        mcp.Meta{TierMetaKey: t.Tier},
		}
		if len(t.Schema.Returns) > 0 {
			mt.OutputSchema = rawSchema(t.Schema.Returns)
		}
		if len(t.Annotations) > 0 {
			var a mcp.ToolAnnotations
			if err := json.Unmarshal(t.Annotations, &a); err == nil {
				mt.Annotations = &a
				mt.Title = a.Title
			}
		}
		out.Tools = append(out.Tools, mt)
	}
	return out
}

// rawSchema is a tool's JSON Schema as the SDK sends it; an absent one is
// the empty object schema MCP requires.
func rawSchema(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}

// callTool runs one call through the daemon (rpc.MCPSession.Call), with
// the idempotency key and the W3C Trace Context (_meta.traceparent and
// tracestate, as MCP carries them) the request's _meta names. A
// refusal by a gate, a failure, a timeout and a rejected approval are the
// tool's error (isError), worded by the daemon; an unknown tool and a call
// over the bound are JSON-RPC errors.
func (s *Server) callTool(ctx context.Context, se *session, req *mcp.CallToolRequest) (mcp.Result, error) {
	name := req.Params.Name
	if err := s.takeCall(se.key); err != nil {
		return nil, err
	}
	defer s.releaseCall(se.key)
	var waiting func(rpc.MCPWaiting)
	if token := req.Params.GetProgressToken(); token != nil {
		step := 0.0
		waiting = func(w rpc.MCPWaiting) {
			step++
			msg := fmt.Sprintf("waiting for a person to approve '%s' (%s): approval %s; approve it on the dashboard or with car-server approvals approve %s", w.Tool, w.Required, w.ApprovalID, w.ApprovalID)
			// Sent from the event log's delivery: never wait on the client.
			go func(p float64) {
				if err := req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: p, Message: msg,
					Meta: mcp.Meta{"car-server/approval_id": w.ApprovalID},
				}); err != nil {
					s.log.Debug("MCP progress not sent", zap.Error(err))
				}
			}(step)
		}
	}
	call := rpc.MCPCall{Tool: name, Args: req.Params.Arguments, Waiting: waiting}
	call.IdempotencyKey, _ = req.Params.Meta[IdempotencyKeyMetaKey].(string)
	call.Trace.Traceparent, _ = req.Params.Meta[tracing.TraceparentKey].(string)
	call.Trace.Tracestate, _ = req.Params.Meta[tracing.TracestateKey].(string)
	out, err := se.rpc.Call(ctx, call)
	if errors.Is(err, rpc.ErrMCPUnknownTool) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	meta := mcp.Meta{"car-server/proposal_id": out.ProposalID}
	if out.IsError {
		return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: out.Message}}}, nil
	}
	res := toolResult(out.Output)
	res.Meta = meta
	return res, nil
}

// toolResult is a tool's output as an MCP result: a connector's output is
// the MCP server's CallToolResult already, and passes as it came; any other
// output is its JSON as text, and as structured content when an object.
func toolResult(output any) *mcp.CallToolResult {
	b, err := json.Marshal(output)
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the tool's output could not be encoded: " + err.Error()}}}
	}
	if m, ok := output.(map[string]any); ok {
		if _, has := m["content"]; has {
			var r mcp.CallToolResult
			if json.Unmarshal(b, &r) == nil {
				return &r
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
