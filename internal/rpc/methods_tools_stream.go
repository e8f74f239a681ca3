package rpc

import (
	"context"
	"encoding/json"
	"math"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// toolsPoll drains a handle this connection may see (its own; every one for
// a host): null for an unknown or consumed handle.
func (c *conn) toolsPoll(_ context.Context, params *json.RawMessage) (any, error) {
	handle, err := stringParam(params, "handle")
	if err != nil {
		return nil, err
	}
	return c.srv.rt.Streams.Poll(handle, c.id, c.isHost()), nil
}

// toolsCancel seals a running handle as cancelled; the tool's connection is
// sent tools.cancel {handle}.
func (c *conn) toolsCancel(_ context.Context, params *json.RawMessage) (any, error) {
	handle, err := stringParam(params, "handle")
	if err != nil {
		return nil, err
	}
	reason := "cancelled with tools.cancel"
	if c.isHost() {
		reason = "cancelled with tools.cancel by a host-role connection"
	}
	return protocol.ToolsCancelResult{Cancelled: c.srv.rt.Streams.Cancel(handle, c.id, c.isHost(), reason)}, nil
}

// toolsHandles lists the handles this connection may see (its own; every
// connection's for a host) without draining them.
func (c *conn) toolsHandles(context.Context, *json.RawMessage) (any, error) {
	return protocol.ToolHandlesResult{Handles: c.srv.rt.Streams.List(c.id, c.isHost())}, nil
}

// toolsStreamSubscribe feeds this connection every chunk of the handles it
// may see as tools.stream.event; a second subscribe changes nothing.
func (c *conn) toolsStreamSubscribe(context.Context, *json.RawMessage) (any, error) {
	c.srv.rt.Streams.Subscribe(c.id, c.isHost(), c.toolEventFeed().Push)
	return protocol.ToolStreamSubscribeResult{Subscribed: true}, nil
}

func (c *conn) toolsStreamUnsubscribe(context.Context, *json.RawMessage) (any, error) {
	was := c.srv.rt.Streams.Unsubscribe(c.id)
	return protocol.ToolStreamSubscribeResult{Subscribed: false, WasSubscribed: &was}, nil
}

// toolEventFeed is this connection's tools.stream.event queue, made on first
// use; run closes it when the connection ends.
func (c *conn) toolEventFeed() *fanout.Queue[streams.Event] {
	return feed(c, &c.toolEvents, c.deliverToolEvent)
}

// deliverToolEvent writes one chunk, saying how many were dropped before it.
func (c *conn) deliverToolEvent(ctx context.Context, it fanout.Item[streams.Event]) error {
	return c.notify(ctx, protocol.MethodToolsStreamEvent, protocol.ToolStreamEvent{Handle: it.Value.Handle, Chunk: it.Value.Chunk, Dropped: it.Dropped})
}

// handleNotification takes a client's notification on the read loop, so it
// must not block: a chunk is a map lookup, a buffer append and queue pushes.
func (c *conn) handleNotification(req *jsonrpc2.Request) {
	if req.Method != protocol.MethodToolsStreamChunk {
		c.log.Debug("notification ignored", zap.String("method", req.Method))
		return
	}
	var p protocol.ToolStreamChunkParams
	err := decodeParams(req.Params, &p, "{handle: string, chunk: ToolStreamChunk}")
	if err == nil {
		err = c.srv.rt.Streams.Chunk(c.id, p.Handle, p.Chunk)
	}
	if err != nil {
		c.chunkIgnored(p.Handle, err)
	}
}

// chunkIgnored logs a chunk the daemon did not take. A notification has no
// reply, so nothing goes back to the client; the log is at warn level for
// the 1st, 10th, 100th… on a connection and at debug level otherwise, so
// that a client sending many cannot flood it.
func (c *conn) chunkIgnored(handle string, err error) {
	n := c.ignoredChunks.Add(1)
	fields := []zap.Field{zap.String("handle", handle), zap.String("error", err.Error()), zap.Uint64("ignored_total", n)}
	if l := math.Log10(float64(n)); l == math.Trunc(l) {
		c.log.Warn("tools.stream.chunk ignored", fields...)
		return
	}
	c.log.Debug("tools.stream.chunk ignored", fields...)
}
