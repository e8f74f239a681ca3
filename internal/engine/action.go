package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parslee-ai/car-server/internal/idempotency"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/protocol"
)

// runAction takes one admitted action through the per-action pipeline:
// references → checks (policies) → preconditions → (tool: result cache →
// rate limit → dispatch with retries) → effects. It always finishes the node.
func (r *run) runAction(ctx context.Context, i int) {
	nd := &r.nodes[i]
	a := nd.action
	start := time.Now()
	r.emit(EventActionStarted, a.ID, map[string]any{"type": string(a.Type), "tool": a.Tool})
	setDuration := func() {
		r.mu.Lock()
		nd.result.DurationMs = MsSince(start)
		r.mu.Unlock()
	}

	params := a.Parameters
	effects := a.ExpectedEffects
	if r.graph.hasRefs[i] {
		p, err := interpolate(any(a.Parameters), r.output)
		if err == nil {
			var e any
			e, err = interpolate(any(a.ExpectedEffects), r.output)
			effects, _ = e.(map[string]any)
		}
		if err != nil {
			setDuration()
			r.finish(i, protocol.StatusRejected, nil, err.Error(), map[string]any{"gate": "reference"})
			return
		}
		params = p.(map[string]any)
		if problem := builtinParamsProblem(a.Type, params); problem != "" {
			setDuration()
			r.finish(i, protocol.StatusRejected, nil, "with its references resolved: "+problem, map[string]any{"gate": "reference"})
			return
		}
		if nd.tool != nil {
			if err := nd.tool.ValidateParams(any(params)); err != nil {
				setDuration()
				r.finish(i, protocol.StatusRejected, nil, err.Error(), map[string]any{"gate": "schema"})
				return
			}
		}
	}

	// Checks see the parameters the tool would receive, references resolved.
	checked := a
	if r.graph.hasRefs[i] {
		resolved := *a
		resolved.Parameters = params
		checked = &resolved
	}
	for _, chk := range r.rt.checks {
		if err := chk.Check(ctx, r.sub, checked); err != nil {
			setDuration()
			r.finish(i, protocol.StatusRejected, nil, err.Error(), map[string]any{"gate": chk.Name()})
			return
		}
	}
	if r.graph.hasRefs[i] {
		if err := r.rt.checkResolved(r.sub, checked); err != nil {
			setDuration()
			r.finish(i, protocol.StatusRejected, nil, err.Error(), map[string]any{"gate": "permission"})
			return
		}
	}
	for _, pc := range a.Preconditions {
		v, ok := r.rt.State.Get(r.sub.Tenant, pc.Key)
		if err := checkPrecondition(pc, v, ok); err != nil {
			setDuration()
			r.finish(i, protocol.StatusRejected, nil, err.Error(), map[string]any{"gate": "precondition"})
			return
		}
	}
	var output any
	var err error
	changes := map[string]any{}
	switch a.Type {
	case protocol.ActionToolCall:
		var hit string
		output, hit, err = r.callTool(ctx, i, params)
		if hit != "" {
			r.mu.Lock()
			nd.result.CacheHit = hit
			r.mu.Unlock()
		}
	case protocol.ActionStateWrite:
		key := params["key"].(string)
		output = params["value"]
		r.write(key, output)
		changes[key] = output
	case protocol.ActionStateRead:
		output = r.readState(params)
	case protocol.ActionAssertion:
		pc := protocol.Precondition{Key: params["key"].(string), Operator: "eq", Value: params["value"]}
		if op, ok := params["operator"].(string); ok && op != "" {
			pc.Operator = op
		}
		if d, ok := params["description"].(string); ok {
			pc.Description = d
		}
		v, ok := r.rt.State.Get(r.sub.Tenant, pc.Key)
		if err = checkPrecondition(pc, v, ok); err != nil {
			err = fmt.Errorf("assertion failed: %w", err)
		} else {
			output = true
		}
	}
	setDuration()
	if err != nil {
		status := protocol.StatusFailed
		if a.FailureBehavior == protocol.FailSkip && ctx.Err() == nil {
			status = protocol.StatusSkipped
		}
		r.finish(i, status, nil, err.Error(), nil)
		return
	}
	for _, k := range jsonvalue.SortedKeys(effects) {
		r.write(k, effects[k])
		changes[k] = effects[k]
	}
	for _, k := range jsonvalue.SortedKeys(changes) {
		r.emit(EventStateChanged, a.ID, map[string]any{"key": k, "tenant": r.sub.Tenant})
	}
	r.mu.Lock()
	nd.result.StateChanges = changes
	hit := nd.result.CacheHit
	r.mu.Unlock()
	var data map[string]any
	if hit != "" {
		data = map[string]any{"cache_hit": hit}
	}
	r.finish(i, protocol.StatusSucceeded, output, "", data)
}

// readState is the output of a state_read: the value at key, or an object of
// the values at keys (null where unset).
func (r *run) readState(params map[string]any) any {
	if k, ok := params["key"].(string); ok {
		v, _ := r.rt.State.Get(r.sub.Tenant, k)
		return v
	}
	out := map[string]any{}
	keys, _ := params["keys"].([]any)
	for _, k := range keys {
		if s, ok := k.(string); ok {
			v, _ := r.rt.State.Get(r.sub.Tenant, s)
			out[s] = v
		}
	}
	return out
}

// callTool dispatches a tool_call, retrying as its failure_behavior says. An
// idempotent call is answered from the idempotency cache when it can be, and
// its result is journaled before callTool returns. hit names the cache that
// answered, if one did.
func (r *run) callTool(ctx context.Context, i int, params map[string]any) (out any, hit string, err error) {
	nd := &r.nodes[i]
	a, t := nd.action, nd.tool
	var idemKey string
	if idem := r.rt.opts.Idempotency; idem != nil && (a.Idempotent || t.Schema.Idempotent) {
		explicit, _ := a.Metadata["idempotency_key"].(string)
		idemKey = idempotency.Key(r.sub.Tenant, a.Tool, params, explicit)
		if out, ok := idem.Lookup(idemKey); ok {
			return out, "idempotency", nil
		}
	}
	var cacheKey string
	if t.cache != nil {
		cacheKey = string(jsonvalue.Canonical(params))
		if out, ok := t.cache.get(cacheKey, time.Now()); ok {
			return out, "result", nil
		}
	}
	out, err = r.dispatch(ctx, a, t, params)
	if err != nil {
		return nil, "", err
	}
	if idemKey != "" {
		if err := r.rt.opts.Idempotency.Record(idemKey, a.Tool, r.sub.Proposal.ID, out); err != nil {
			return nil, "", fmt.Errorf("tool '%s' ran, but its result could not be journaled, so a re-submission may run it again: %v", a.Tool, err)
		}
		r.mu.Lock()
		r.idemKeys = append(r.idemKeys, idemKey)
		r.mu.Unlock()
	}
	if t.cache != nil {
		t.cache.put(cacheKey, out, time.Now())
	}
	return out, "", nil
}

// dispatch calls the tool through the session's executor, with retries.
func (r *run) dispatch(ctx context.Context, a *protocol.Action, t *Tool, params map[string]any) (any, error) {
	if r.sub.Session.Executor == nil && !t.builtin {
		return nil, errors.New("this session has no way to run tools")
	}
	timeout := r.rt.opts.ToolTimeout
	if a.TimeoutMs != nil {
		timeout = time.Duration(*a.TimeoutMs) * time.Millisecond
	}
	attempts := 1
	if a.FailureBehavior == protocol.FailRetry {
		attempts += int(a.MaxRetries)
	}
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			r.mu.Lock()
			r.retries++
			r.mu.Unlock()
			r.emit(EventActionRetried, a.ID, map[string]any{"tool": a.Tool, "attempt": attempt, "error": lastErr.Error()})
			if err := sleepCtx(ctx, r.backoff(attempt-1)); err != nil {
				return nil, fmt.Errorf("%v (retry abandoned: %v)", lastErr, context.Cause(ctx))
			}
			// Every attempt passes the checks again: a rate-limit rule counts
			// attempts, and a rule may have changed since the first.
			again := *a
			again.Parameters = params
			for _, chk := range r.rt.checks {
				if err := chk.Check(ctx, r.sub, &again); err != nil {
					return nil, fmt.Errorf("%v; retry %d refused: %v", lastErr, attempt, err)
				}
			}
		}
		if t.limiter != nil {
			if err := t.limiter.Wait(ctx); err != nil {
				return nil, fmt.Errorf("waiting for tool '%s' rate limit: %v", a.Tool, context.Cause(ctx))
			}
		}
		r.mu.Lock()
		r.toolCalls++
		r.mu.Unlock()
		cctx, cancel := context.WithTimeoutCause(ctx, timeout,
			fmt.Errorf("tool '%s' timed out after %s (timeout_ms)", a.Tool, timeout))
		call := ToolCall{
			ProposalID: r.sub.Proposal.ID,
			ActionID:   a.ID,
			Tool:       a.Tool,
			Parameters: params,
			Timeout:    timeout,
			Attempt:    attempt,
		}
		var out any
		var err error
		if t.builtin {
			out, err = r.rt.sendMessage(cctx, r.sub, call)
		} else {
			out, err = r.sub.Session.Executor.ExecuteTool(cctx, call)
		}
		cause := context.Cause(cctx)
		cancel()
		if err == nil {
			return out, nil
		}
		if cause != nil {
			r.emit(EventToolCancelled, a.ID, map[string]any{"tool": a.Tool, "attempt": attempt, "reason": cause.Error()})
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, err
		}
	}
	if attempts > 1 {
		return nil, fmt.Errorf("%v (gave up after %d attempts)", lastErr, attempts)
	}
	return nil, lastErr
}

// backoff is the wait before retry n (1-based): base·2^(n-1), capped.
func (r *run) backoff(n int) time.Duration {
	d := r.rt.opts.RetryBase
	for k := 1; k < n && d < r.rt.opts.RetryCap; k++ {
		d *= 2
	}
	return min(d, r.rt.opts.RetryCap)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
