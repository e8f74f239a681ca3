package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parslee-ai/car-server/protocol"
)

// StreamFunc runs one streaming or long-running tool invocation, writing
// its output through w. Its ctx ends when the daemon cancels the handle
// (tools.cancel {handle}) or the client closes. What it returns ends the
// handle: a done chunk with the result, or an error chunk with the message.
type StreamFunc func(ctx context.Context, call protocol.ToolExecuteParams, w *ChunkWriter) (result any, err error)

// ChunkWriter sends the chunks of one handle as tools.stream.chunk
// notifications.
type ChunkWriter struct {
	c      *Client
	handle string
}

// Handle is the daemon-minted handle the chunks name.
func (w *ChunkWriter) Handle() string { return w.handle }

// Write sends one chunk.
func (w *ChunkWriter) Write(ctx context.Context, chunk protocol.ToolStreamChunk) error {
	raw, err := json.Marshal(chunk)
	if err != nil {
		return fmt.Errorf("encode %s chunk: %w", chunk.Kind, err)
	}
	return w.c.Notify(ctx, protocol.MethodToolsStreamChunk, protocol.ToolStreamChunkParams{Handle: w.handle, Chunk: raw})
}

// Text sends a text chunk.
func (w *ChunkWriter) Text(ctx context.Context, text string) error {
	return w.Write(ctx, protocol.ToolStreamChunk{Kind: protocol.ChunkText, Text: &text})
}

// Data sends a data chunk holding v as JSON.
func (w *ChunkWriter) Data(ctx context.Context, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode data chunk: %w", err)
	}
	return w.Write(ctx, protocol.ToolStreamChunk{Kind: protocol.ChunkData, Data: raw})
}

// Progress sends a progress chunk; fraction is from 0 to 1.
func (w *ChunkWriter) Progress(ctx context.Context, fraction float64, message string) error {
	c := protocol.ToolStreamChunk{Kind: protocol.ChunkProgress, Fraction: &fraction}
	if message != "" {
		c.Message = &message
	}
	return w.Write(ctx, c)
}

// errHandleCancelled is the cause of a stream's ctx when the daemon
// cancelled its handle.
var errHandleCancelled = errors.New("the daemon cancelled the handle")

// Stream starts fn for a detached tools.execute call and returns the answer
// the daemon waits for, {started: true}: call it from the tools.execute
// handler when call.Handle is set. fn runs on its own goroutine, which Close
// waits for.
func (c *Client) Stream(call protocol.ToolExecuteParams, fn StreamFunc) (any, error) {
	if call.Handle == "" {
		return nil, fmt.Errorf("tool '%s' was called one_shot (no handle); answer it with its result", call.Tool)
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel(nil)
		return nil, errors.New("the client is closed")
	}
	c.streams[call.Handle] = cancel
	c.inflight.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.inflight.Done()
		defer func() {
			c.mu.Lock()
			delete(c.streams, call.Handle)
			c.mu.Unlock()
			cancel(nil)
		}()
		w := &ChunkWriter{c: c, handle: call.Handle}
		result, err := fn(ctx, call, w)
		if errors.Is(context.Cause(ctx), errHandleCancelled) {
			return // the daemon has sealed the handle; a last chunk would be ignored
		}
		last := protocol.ToolStreamChunk{Kind: protocol.ChunkDone}
		if err != nil {
			msg := err.Error()
			last = protocol.ToolStreamChunk{Kind: protocol.ChunkError, Message: &msg}
		} else if result != nil {
			raw, merr := json.Marshal(result)
			if merr != nil {
				msg := fmt.Sprintf("tool '%s' returned a result that is not JSON: %v", call.Tool, merr)
				last = protocol.ToolStreamChunk{Kind: protocol.ChunkError, Message: &msg}
			} else {
				last.Result = raw
			}
		}
		_ = w.Write(c.ctx, last) // fails only when the connection is gone, and the handle with it
	}()
	return map[string]any{"started": true}, nil
}

// cancelStream ends the ctx of the stream running handle, if there is one.
func (c *Client) cancelStream(params json.RawMessage) {
	var p protocol.ToolCancelParams
	if json.Unmarshal(params, &p) != nil || p.Handle == "" {
		return
	}
	c.mu.RLock()
	cancel := c.streams[p.Handle]
	c.mu.RUnlock()
	if cancel != nil {
		cancel(errHandleCancelled)
	}
}
