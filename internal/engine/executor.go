package engine

import (
	"context"
	"time"

	"github.com/parslee-ai/car-server/protocol"
)

// ToolCall is one dispatch of a tool.
type ToolCall struct {
	ProposalID string
	ActionID   string
	Tool       string
	Parameters map[string]any
	Timeout    time.Duration // the budget of this attempt; ctx carries the same deadline
	Attempt    int           // 1-based
	Mode       string        // for a detached call: streaming or long_running
	Handle     string        // for a detached call: the handle its chunks name
	// Fence is the fencing token of an idempotent call (its key and its
	// claim's epoch); nil for any other call.
	Fence *protocol.Fence
}

// ToolExecutor runs tools for a session. The engine gives up on a call by
// cancelling ctx; context.Cause(ctx) says why, and an executor should pass
// that reason on to whoever runs the tool.
type ToolExecutor interface {
	ExecuteTool(ctx context.Context, call ToolCall) (any, error)
}

// DetachedExecutor is an executor that can run detached tools: ExecuteTool
// with a Handle returns once the tool has started, and the tool's chunks
// reach Runtime.Streams. CancelHandle tells the tool to stop that handle.
type DetachedExecutor interface {
	ToolExecutor
	CancelHandle(call ToolCall, reason string)
}
