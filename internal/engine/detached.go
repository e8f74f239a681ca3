package engine

import (
	"context"
	"fmt"

	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// startDetached starts a streaming or long-running tool: a handle is
// opened, the executor is asked to start the tool under the action's
// timeout_ms (which bounds only the start), and the action's output is
// {tool_handle, status: "running"}. It is never answered from a cache and
// never retried: a stream cannot be replayed.
func (r *run) startDetached(ctx context.Context, i int, params map[string]any) (any, error) {
	nd := &r.nodes[i]
	a, t := nd.action, nd.tool
	exec, ok := r.sub.Session.Executor.(DetachedExecutor)
	if t.builtin || !ok {
		return nil, fmt.Errorf("tool '%s' cannot run %s here: this session's tools run one_shot only", a.Tool, a.InvocationMode)
	}
	if err := r.meterCall(); err != nil {
		return nil, err // a budget counts a started stream as a tool call
	}
	if err := r.waitForToken(ctx, a, t); err != nil {
		return nil, err
	}
	timeout := r.rt.actionTimeout(a)
	call := ToolCall{
		ProposalID: r.sub.Proposal.ID, ActionID: a.ID, Tool: a.Tool, Parameters: params,
		Timeout: timeout, Attempt: 1, Mode: a.InvocationMode,
	}
	info := streams.Info{Tool: a.Tool, Mode: a.InvocationMode, ActionID: a.ID, ProposalID: r.sub.Proposal.ID, Owner: r.sub.Session.ID}
	h, err := r.rt.Streams.Open(info, func(info streams.Info, reason string) {
		stopped := call
		stopped.Handle = info.Handle
		exec.CancelHandle(stopped, reason)
	})
	if err != nil {
		return nil, err
	}
	call.Handle = h.Handle
	r.mu.Lock()
	r.toolCalls++
	if r.handles == nil {
		r.handles = make(map[string]*streams.Handle)
	}
	r.handles[a.ID] = h
	r.mu.Unlock()

	cctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("tool '%s' did not start within %s (timeout_ms bounds a %s tool's start)", a.Tool, timeout, a.InvocationMode))
	defer cancel()
	out, err := exec.ExecuteTool(cctx, call)
	if err == nil {
		err = checkStarted(a, out)
	}
	if err != nil {
		r.rt.Streams.Discard(h)
		return nil, err
	}
	r.rt.Streams.Started(h, func() {
		r.emit(EventToolStreamStarted, a.ID, map[string]any{"tool": a.Tool, "handle": h.Handle, "mode": a.InvocationMode})
	})
	if r.rt.tracing() {
		r.rt.traceStream(ctx, a, h)
	}
	return map[string]any{"tool_handle": h.Handle, "status": string(protocol.ToolRunning)}, nil
}

// checkStarted accepts the answer of a detached tools.execute: {started: true}.
func checkStarted(a *protocol.Action, out any) error {
	if m, ok := out.(map[string]any); ok && m["started"] == true {
		return nil
	}
	return fmt.Errorf("tool '%s' answered a %s tools.execute without {started: true}: answer as soon as the tool has started, then send tools.stream.chunk notifications", a.Tool, a.InvocationMode)
}

// awaitStreams waits until the streams action i awaits have ended, for at
// most its timeout_ms (or the default tool timeout), and keeps their results
// for $<id>.result. A stream that did not succeed fails the action.
func (r *run) awaitStreams(ctx context.Context, i int) error {
	a := r.nodes[i].action
	if len(a.Await) == 0 {
		return nil
	}
	wait := r.rt.awaitBudget(a)
	wctx, cancel := context.WithTimeoutCause(ctx, wait,
		fmt.Errorf("action '%s' waited %s for the streams it awaits (timeout_ms, or tool_timeout): raise its timeout_ms", a.ID, wait))
	defer cancel()
	for _, id := range a.Await {
		r.mu.Lock()
		h := r.handles[id]
		r.mu.Unlock()
		if h == nil {
			return fmt.Errorf("awaited action '%s' started no stream", id)
		}
		select {
		case <-h.Done():
		case <-wctx.Done():
			return fmt.Errorf("waiting for the stream of action '%s' (handle %s): %w", id, h.Handle, context.Cause(wctx))
		}
		status, result, msg := r.rt.Streams.Outcome(h)
		if status != protocol.ToolSucceeded {
			return fmt.Errorf("awaited action '%s' (handle %s) ended %s: %s", id, h.Handle, status, msg)
		}
		v, err := protocol.DecodeValue(result)
		if err != nil {
			return fmt.Errorf("awaited action '%s' (handle %s): its result is not JSON: %w", id, h.Handle, err)
		}
		r.mu.Lock()
		if r.results == nil {
			r.results = make(map[string]any)
		}
		r.results[id] = v
		r.mu.Unlock()
	}
	return nil
}

// recordStreamEnd is the event of a handle's end.
func (rt *Runtime) recordStreamEnd(e streams.Ended) {
	data := map[string]any{"tool": e.Tool, "handle": e.Handle, "status": string(e.Status)}
	if e.Error != "" {
		data["error"] = e.Error
	}
	if e.Dropped > 0 {
		data["dropped_chunks"] = e.Dropped
	}
	rt.Events.Append(Event{Kind: EventToolStreamEnded, ProposalID: e.ProposalID, ActionID: e.ActionID, Connection: e.Owner, Data: data})
}
