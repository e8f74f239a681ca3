package rpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/bufpool"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/internal/tracing"
	"github.com/parslee-ai/car-server/internal/wsstream"
	"github.com/parslee-ai/car-server/protocol"
)

// ExecuteTool implements engine.ToolExecutor by calling tools.execute on
// this connection. When the engine gives up (timeout, abort, deadline,
// shutdown) the client is told with a tools.cancel notification carrying the
// same request_id.
func (c *conn) ExecuteTool(ctx context.Context, call engine.ToolCall) (any, error) {
	<-c.ready
	id := callbackID(call, c.callbackSeq.Add(1))
	params := protocol.ToolExecuteParams{
		ActionID:       call.ActionID,
		Tool:           call.Tool,
		Parameters:     call.Parameters,
		TimeoutMs:      uint64(call.Timeout.Milliseconds()),
		Attempt:        call.Attempt,
		RequestID:      id,
		SessionID:      c.id,
		InvocationMode: call.Mode,
		Handle:         call.Handle,
		AgentID:        c.agentID(),
		Fence:          call.Fence,
	}
	var span trace.SpanContext
	if c.srv.opts.Tracer != nil {
		span = toolCallTrace(ctx, id)
	}
	bp := paramBuffers.Get()
	encoded, err := appendToolExecute(*bp, &params, span)
	*bp = encoded
	var w jsonrpc2.Waiter
	slot := &wsstream.Call{Params: encoded}
	if err == nil {
		c.calls.Put(id, slot)
		defer c.calls.Drop(id)
		// No params here: sending puts the encoded ones on the request, and
		// answered takes the result off the reply (see wsstream.Call).
		w, err = c.rpc.DispatchCall(ctx, protocol.MethodToolsExecute, nil, jsonrpc2.PickID(jsonrpc2.ID{Str: id, IsString: true}))
	}
	slot.Params = nil // written: the buffer goes back
	paramBuffers.Put(bp)
	if err != nil {
		return nil, fmt.Errorf("tool '%s': could not reach the client: %v", call.Tool, disconnectText(err))
	}
	start := time.Now()
	err = w.Wait(ctx, nil)
	outcome := "ok"
	defer func() { metrics.CallbackSeconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds()) }()
	switch {
	case err == nil:
	case errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(context.Cause(ctx), errDisconnected):
		outcome = "disconnected"
		return nil, fmt.Errorf("tool '%s': the client disconnected before answering (request %s)", call.Tool, id)
	case ctx.Err() != nil:
		outcome = "cancelled"
		reason := context.Cause(ctx).Error()
		c.sendCancel(protocol.ToolCancelParams{RequestID: id, ActionID: call.ActionID, Reason: reason, Handle: call.Handle})
		c.abandon(id)
		return nil, errors.New(reason)
	default:
		outcome = "error"
		var rerr *jsonrpc2.Error
		if errors.As(err, &rerr) {
			return nil, errors.New(rerr.Message)
		}
		return nil, fmt.Errorf("tool '%s': %v", call.Tool, err)
	}
	// The reply's result, which answered put on the slot before the call
	// was done; read only then: a call given up on (ctx ended) may still be
	// answered while the slot is registered.
	out, err := protocol.DecodeValue(slot.Result)
	if err != nil {
		return nil, fmt.Errorf("tool '%s' answered with a result that is not JSON: %v", call.Tool, err)
	}
	if m, ok := out.(map[string]any); ok {
		if msg, ok := m["error"].(string); ok {
			return nil, errors.New(msg)
		}
	}
	return out, nil
}

// paramBuffers hold tools.execute params while they are encoded.
var paramBuffers = bufpool.New(512, 64<<10)

// appendToolExecute encodes tools.execute's params exactly as json.Marshal
// does, without reflecting over the struct and its parameters map. A valid
// span, when p has no Meta, is written as the Meta of its traceparent and
// tracestate would be, without making them strings first.
func appendToolExecute(buf []byte, p *protocol.ToolExecuteParams, span trace.SpanContext) ([]byte, error) {
	str := func(name, v string, omitEmpty bool) {
		if v != "" || !omitEmpty {
			buf = append(buf, `,"`...)
			buf = append(buf, name...)
			buf = append(buf, `":`...)
			buf = jsonvalue.AppendString(buf, v)
		}
	}
	buf = append(buf, `{"action_id":`...)
	buf = jsonvalue.AppendString(buf, p.ActionID)
	str("tool", p.Tool, false)
	buf = append(buf, `,"parameters":`...)
	var err error
	if buf, err = jsonvalue.Append(buf, p.Parameters); err != nil {
		return buf, err
	}
	buf = append(buf, `,"timeout_ms":`...)
	buf = strconv.AppendUint(buf, p.TimeoutMs, 10)
	buf = append(buf, `,"attempt":`...)
	buf = strconv.AppendInt(buf, int64(p.Attempt), 10)
	str("request_id", p.RequestID, false)
	str("session_id", p.SessionID, true)
	str("agent_id", p.AgentID, true)
	str("invocation_mode", p.InvocationMode, true)
	str("handle", p.Handle, true)
	if f := p.Fence; f != nil {
		buf = append(buf, `,"fence":{"key":`...)
		buf = jsonvalue.AppendString(buf, f.Key)
		buf = append(buf, `,"epoch":`...)
		buf = strconv.AppendUint(buf, f.Epoch, 10)
		buf = append(buf, '}')
	}
	if m := p.Meta; m != nil {
		buf = append(buf, `,"_meta":{`...)
		if m.Traceparent != "" {
			buf = append(buf, `"traceparent":`...)
			buf = jsonvalue.AppendString(buf, m.Traceparent)
		}
		if m.Tracestate != "" {
			if m.Traceparent != "" {
				buf = append(buf, ',')
			}
			buf = append(buf, `"tracestate":`...)
			buf = jsonvalue.AppendString(buf, m.Tracestate)
		}
		buf = append(buf, '}')
	} else if span.IsValid() {
		buf = append(buf, `,"_meta":{"traceparent":"`...)
		buf = tracing.AppendTraceparent(buf, span) // hex digits and dashes: nothing to escape
		buf = append(buf, '"')
		if ts := span.TraceState(); ts.Len() > 0 {
			buf = append(buf, `,"tracestate":`...)
			buf = jsonvalue.AppendString(buf, ts.String())
		}
		buf = append(buf, '}')
	}
	return append(buf, '}'), nil
}

// sending puts a tools.execute's encoded params on its request as the
// library sends it.
func (c *conn) sending(req *jsonrpc2.Request, _ *jsonrpc2.Response) {
	if req == nil || req.Params != nil || !req.ID.IsString || req.Method != protocol.MethodToolsExecute {
		return
	}
	if slot := c.calls.Get(req.ID.Str); slot != nil {
		req.Params = &slot.Params
	}
}

// abandon remembers a callback given up on. A client that leaves more than
// MaxAbandoned of them unanswered is closed: each would otherwise be held
// until the connection ends.
func (c *conn) abandon(id string) {
	c.abandonedMu.Lock()
	if c.abandoned == nil {
		c.abandoned = make(map[string]struct{})
	}
	c.abandoned[id] = struct{}{}
	n := len(c.abandoned)
	c.abandonedMu.Unlock()
	if n > c.srv.opts.MaxAbandoned {
		c.log.Warn("closing: the client left too many cancelled callbacks unanswered", zap.Int("abandoned", n))
		c.goOwned(func() {
			_ = c.ws.Close(websocket.StatusPolicyViolation, "too many cancelled tools.execute calls left unanswered; answer or drop them after tools.cancel")
		})
	}
}

// answered forgets an abandoned callback once its late reply arrives, and
// reports a reply that matches no callback at all.
func (c *conn) answered(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if resp == nil {
		return
	}
	if req == nil {
		c.unmatchedReply(resp.ID)
		return
	}
	if !resp.ID.IsString {
		return
	}
	if slot := c.calls.Get(resp.ID.Str); slot != nil && resp.Error == nil && resp.Result != nil {
		slot.Result = *resp.Result
	}
	c.abandonedMu.Lock()
	delete(c.abandoned, resp.ID.Str)
	c.abandonedMu.Unlock()
}

// unmatchedLogEvery is the least time between two warnings of a connection
// about replies that match no callback; a test lengthens it.
var unmatchedLogEvery = time.Second

// unmatchedReply warns, at most once per unmatchedLogEvery, of a reply
// whose id matches no pending tools.execute: the library drops it, and the
// client, which meant it for a callback, would otherwise never learn why
// its action waits out its timeout.
func (c *conn) unmatchedReply(id jsonrpc2.ID) {
	n := c.unmatched.Add(1)
	now := time.Now().UnixNano()
	last := c.unmatchedLogged.Load()
	fields := []zap.Field{zap.String("id", id.String()), zap.Uint64("unmatched_total", n)}
	const msg = "reply matches no pending tools.execute; dropped (answer with the id of the tools.execute request)"
	if (last != 0 && now-last < int64(unmatchedLogEvery)) || !c.unmatchedLogged.CompareAndSwap(last, now) {
		c.log.Debug(msg, fields...)
		return
	}
	c.log.Warn(msg, fields...)
}

// sendCancel tells the client the daemon gave up on a callback, or on a
// handle.
func (c *conn) sendCancel(p protocol.ToolCancelParams) {
	err := c.rpc.Notify(context.Background(), protocol.MethodToolsCancel, p)
	if err != nil && !errors.Is(err, jsonrpc2.ErrClosed) {
		c.log.Debug("tools.cancel not sent", zap.String("request_id", p.RequestID), zap.String("handle", p.Handle), zap.Error(err))
	}
}

// CancelHandle implements engine.DetachedExecutor: the tool running the
// handle is told to stop with tools.cancel {request_id, action_id, reason,
// handle}.
func (c *conn) CancelHandle(call engine.ToolCall, reason string) {
	<-c.ready
	c.sendCancel(protocol.ToolCancelParams{RequestID: callbackID(call, 0), ActionID: call.ActionID, Reason: reason, Handle: call.Handle})
}

// callbackID is the JSON-RPC id of a tools.execute: "cb-<n>", or for a
// detached call "cb-h<handle>", so that a cancel of the handle carries the
// request_id of the call that started it.
func callbackID(call engine.ToolCall, n uint64) string {
	if call.Handle != "" {
		return "cb-h" + call.Handle
	}
	var b [24]byte
	return string(strconv.AppendUint(append(b[:0], "cb-"...), n, 10))
}

func disconnectText(err error) string {
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return "the connection is closed"
	}
	return err.Error()
}
