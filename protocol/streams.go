package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Invocation modes of a tool_call (Action.InvocationMode).
const (
	ModeOneShot     = "one_shot"     // dispatch waits for the result (default)
	ModeStreaming   = "streaming"    // dispatch starts the tool and returns a handle
	ModeLongRunning = "long_running" // as streaming; the tool may emit few chunks
)

// Detached reports whether the action is a tool_call that is started, not
// awaited: its output is a handle and the proposal goes on.
func (a *Action) Detached() bool {
	return a.Type == ActionToolCall && (a.InvocationMode == ModeStreaming || a.InvocationMode == ModeLongRunning)
}

// ToolStatus is where a detached tool invocation is.
type ToolStatus string

// Statuses of a handle.
const (
	ToolRunning   ToolStatus = "running"
	ToolSucceeded ToolStatus = "succeeded"
	ToolFailed    ToolStatus = "failed"
	ToolCancelled ToolStatus = "cancelled"
)

// Chunk kinds of a ToolStreamChunk; done and error end the handle.
const (
	ChunkText     = "text"
	ChunkData     = "data"
	ChunkProgress = "progress"
	ChunkDone     = "done"
	ChunkError    = "error"
)

// ToolStreamChunk is one piece of a detached tool's output, tagged by kind:
// text {text}, data {data}, progress {fraction, message?}, done {result?},
// error {message}.
type ToolStreamChunk struct {
	Kind     string          `json:"kind"`
	Text     *string         `json:"text,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Fraction *float64        `json:"fraction,omitempty"`
	Message  *string         `json:"message,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
}

// Terminal reports whether the chunk ends its handle.
func (c *ToolStreamChunk) Terminal() bool { return c.Kind == ChunkDone || c.Kind == ChunkError }

// DecodeChunk decodes and checks a chunk: the fields its kind needs are
// present, and a progress fraction is within 0..1.
func DecodeChunk(raw []byte) (ToolStreamChunk, error) {
	const shape = "a ToolStreamChunk {kind: text|data|progress|done|error, ...}"
	var c ToolStreamChunk
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, errors.New("chunk is required: " + shape)
	}
	if err := strictDecode(raw, &c); err != nil {
		return c, fmt.Errorf("chunk: %s", fieldError(err, shape))
	}
	switch c.Kind {
	case ChunkText:
		if c.Text == nil {
			return c, errors.New("a text chunk needs {text: string}")
		}
	case ChunkData:
		if len(c.Data) == 0 {
			return c, errors.New("a data chunk needs {data: any}")
		}
	case ChunkProgress:
		if c.Fraction == nil || math.IsNaN(*c.Fraction) || *c.Fraction < 0 || *c.Fraction > 1 {
			return c, errors.New("a progress chunk needs {fraction: number from 0 to 1, message?: string}")
		}
	case ChunkDone:
	case ChunkError:
		if c.Message == nil {
			return c, errors.New("an error chunk needs {message: string}")
		}
	default:
		return c, fmt.Errorf("chunk kind must be one of text, data, progress, done, error; got '%s'", c.Kind)
	}
	return c, nil
}

// ToolStreamChunkParams are the params of the tools.stream.chunk
// notification a client sends for a handle it runs.
type ToolStreamChunkParams struct {
	Handle string          `json:"handle"`
	Chunk  json.RawMessage `json:"chunk"`
}

// ToolHandleParams are the params of tools.poll and of the tools.cancel
// request.
type ToolHandleParams struct {
	Handle string `json:"handle"`
}

// ToolPollResult is the reply to tools.poll: the chunks since the previous
// poll, oldest first, and how many were dropped from a full buffer.
type ToolPollResult struct {
	Handle        string            `json:"handle"`
	Tool          string            `json:"tool"`
	ActionID      string            `json:"action_id"`
	Status        ToolStatus        `json:"status"`
	Chunks        []json.RawMessage `json:"chunks"`
	DroppedChunks uint64            `json:"dropped_chunks,omitempty"`
	Result        json.RawMessage   `json:"result,omitempty"`
	Error         string            `json:"error,omitempty"`
}

// ToolsCancelResult is the reply to the tools.cancel request.
type ToolsCancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// ToolStreamSubscribeResult is the reply to tools.stream.subscribe and
// tools.stream.unsubscribe.
type ToolStreamSubscribeResult struct {
	Subscribed    bool  `json:"subscribed"`
	WasSubscribed *bool `json:"was_subscribed,omitempty"`
}

// ToolStreamEvent is the params of tools.stream.event. Dropped > 0 says
// that many events before this one were dropped because the subscriber fell
// behind; tools.poll still has them.
type ToolStreamEvent struct {
	Handle  string          `json:"handle"`
	Chunk   json.RawMessage `json:"chunk"`
	Dropped uint64          `json:"dropped,omitempty"`
}

// ToolHandlesResult is the reply to tools.handles: the handles the caller
// may see, oldest first.
type ToolHandlesResult struct {
	Handles []ToolHandleInfo `json:"handles"`
}

// ToolHandleInfo describes one handle without draining it, so that a
// dashboard can show what runs while its owner keeps polling.
type ToolHandleInfo struct {
	Handle          string           `json:"handle"`
	Tool            string           `json:"tool"`
	Mode            string           `json:"mode"`
	Status          ToolStatus       `json:"status"`
	OwnerConnection string           `json:"owner_connection"`
	ProposalID      string           `json:"proposal_id,omitempty"`
	ActionID        string           `json:"action_id,omitempty"`
	StartedAt       time.Time        `json:"started_at"`
	LastChunkAt     *time.Time       `json:"last_chunk_at,omitempty"`
	Progress        *ToolStreamChunk `json:"progress,omitempty"` // the latest progress chunk
	ChunksBuffered  int              `json:"chunks_buffered"`    // waiting for tools.poll
	DroppedChunks   uint64           `json:"dropped_chunks"`     // over the handle's life
}
