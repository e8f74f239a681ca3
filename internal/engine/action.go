package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/idempotency"
	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// outcome is how an action ended: everything finish records. Each stage of
// the per-action pipeline either hands the action on or returns its outcome.
type outcome struct {
	status   protocol.ActionStatus
	output   any
	err      error
	gate     string         // what rejected it, for the event
	cacheHit string         // the cache that answered, if one did
	changes  map[string]any // state keys written, nil for none
}

// change records a state key the action wrote.
func (o *outcome) change(key string, value any) {
	if o.changes == nil {
		o.changes = map[string]any{}
	}
	o.changes[key] = value
}

// rejectedBy is the outcome of an action a stage refused before it ran.
func rejectedBy(gate string, err error) *outcome {
	return &outcome{status: protocol.StatusRejected, err: err, gate: gate}
}

// runAction takes one admitted action through the per-action pipeline —
// references → checks (policies) → preconditions and state dependencies →
// the action itself → effects — and finishes it, once, with its outcome.
func (r *run) runAction(ctx context.Context, i int) {
	a := r.nodes[i].action
	start := time.Now()
	r.rt.Events.Append(Event{Kind: EventActionStarted, ProposalID: r.sub.Proposal.ID, ActionID: a.ID, Connection: r.sub.Session.ID, Data: r.startedData(i)})
	out := r.perform(ctx, i)
	r.mu.Lock()
	r.nodes[i].result.DurationMs = MsSince(start)
	r.mu.Unlock()
	r.finish(i, out)
}

// startedData is the data of an action_started event: its type and tool
// (and the agent), one map for every action of the run with the same type
// and tool, since an event's data is never changed once appended.
func (r *run) startedData(i int) map[string]any {
	a := r.nodes[i].action
	key := startedKey{a.Type, a.Tool}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.started[key]; ok {
		return d
	}
	d := map[string]any{"type": typeValue(a.Type), "tool": r.toolValue(i)}
	if r.sub.Agent != "" {
		d["agent"] = r.sub.Agent
	}
	if r.started == nil {
		r.started = map[startedKey]map[string]any{}
	}
	r.started[key] = d
	return d
}

// startedKey is what the data of an action_started event depends on.
type startedKey struct {
	typ  protocol.ActionType
	tool string
}

// typeValue is an action type as an event's data holds it, boxed once.
func typeValue(t protocol.ActionType) any {
	switch t {
	case protocol.ActionToolCall:
		return string(protocol.ActionToolCall)
	case protocol.ActionStateWrite:
		return string(protocol.ActionStateWrite)
	case protocol.ActionStateRead:
		return string(protocol.ActionStateRead)
	case protocol.ActionAssertion:
		return string(protocol.ActionAssertion)
	}
	return string(t)
}

// toolSpanName is the name of an action's execute_tool span: made once
// per registered tool.
func (r *run) toolSpanName(i int) string {
	if t := r.nodes[i].tool; t != nil && t.spanName != "" && t.Schema.Name == r.nodes[i].action.Tool {
		return t.spanName
	}
	return SpanToolCall + r.nodes[i].action.Tool
}

// toolValue is an action's tool name as an event's data holds it: boxed
// once per registered tool.
func (r *run) toolValue(i int) any {
	if t := r.nodes[i].tool; t != nil && t.nameValue != nil && t.Schema.Name == r.nodes[i].action.Tool {
		return t.nameValue
	}
	return r.nodes[i].action.Tool
}

// perform runs the stages of runAction and returns the action's outcome.
func (r *run) perform(ctx context.Context, i int) outcome {
	a := r.nodes[i].action
	if err := r.awaitStreams(ctx, i); err != nil {
		return failure(ctx, a, outcome{err: err})
	}
	params, effects, rej := r.resolve(ctx, i)
	if rej != nil {
		return *rej
	}
	if rej := r.admitAction(ctx, i, params); rej != nil {
		return *rej
	}
	if rej := r.meterAction(i); rej != nil {
		return *rej
	}
	out := r.act(ctx, i, params)
	if out.err != nil {
		return failure(ctx, a, out)
	}
	for _, k := range jsonvalue.SortedKeys(effects) {
		if err := r.write(ctx, k, effects[k]); err != nil {
			return failure(ctx, a, outcome{err: fmt.Errorf("the action ran, but its expected effects were not all written: %w", err)})
		}
		out.change(k, effects[k])
	}
	for _, k := range jsonvalue.SortedKeys(out.changes) {
		r.emit(EventStateChanged, a.ID, map[string]any{"key": k, "tenant": r.sub.Tenant})
	}
	out.status = protocol.StatusSucceeded
	return out
}

// failure is the outcome of an action that ran and failed: skipped when its
// failure_behavior says so and the proposal goes on, failed otherwise.
func failure(ctx context.Context, a *protocol.Action, out outcome) outcome {
	out.status = protocol.StatusFailed
	if a.FailureBehavior == protocol.FailSkip && ctx.Err() == nil {
		out.status = protocol.StatusSkipped
	}
	out.output, out.changes = nil, nil
	return out
}

// resolve returns the action's parameters and expected effects with their
// $id.output references replaced, re-checked now that they are known.
func (r *run) resolve(ctx context.Context, i int) (params, effects map[string]any, rej *outcome) {
	nd := &r.nodes[i]
	a := nd.action
	if !r.graph.hasRefs[i] {
		return a.Parameters, a.ExpectedEffects, nil
	}
	budget := &resolveBudget{
		action: a.ID, left: r.rt.opts.MaxResolvedActionBytes, limit: r.rt.opts.MaxResolvedActionBytes,
		proposalUsed: &r.resolved, proposal: r.rt.opts.MaxResolvedProposalBytes, known: r.outputSize,
	}
	// Each reference is charged its output's size before anything is
	// built; a state_write's output is its value, whose size is summed here.
	params, _, valueSize, err := resolveObject(a.Parameters, r.output, budget, "value")
	if err != nil {
		return nil, nil, rejectedBy("reference", err)
	}
	if a.Type == protocol.ActionStateWrite && valueSize >= 0 {
		r.knowSize(refKey{id: a.ID}, valueSize)
	}
	e, err := interpolate(any(a.ExpectedEffects), r.output, budget)
	if err != nil {
		return nil, nil, rejectedBy("reference", err)
	}
	// interpolate keeps the shape of what it is given; a proposal decoded
	// expected_effects as an object (or left it nil).
	effects, okE := e.(map[string]any)
	if !okE && e != nil {
		return nil, nil, rejectedBy("reference", errors.New("with its references resolved, expected_effects is no longer an object"))
	}
	if problem := builtinParamsProblem(a.Type, params); problem != "" {
		return nil, nil, rejectedBy("reference", errors.New("with its references resolved: "+problem))
	}
	if nd.tool != nil {
		if err := nd.tool.ValidateParams(ctx, any(params)); err != nil {
			return nil, nil, rejectedBy("schema", err)
		}
	}
	return params, effects, nil
}

// admitAction runs the per-action checks on the parameters the tool would
// receive, then the preconditions and state dependencies against state now.
func (r *run) admitAction(ctx context.Context, i int, params map[string]any) *outcome {
	a := r.nodes[i].action
	if reason, ok := r.sub.denied[a.ID]; ok {
		return rejectedBy("permission", errors.New(reason))
	}
	checked := a
	if r.graph.hasRefs[i] {
		resolved := *a
		resolved.Parameters = params
		checked = &resolved
	}
	for _, chk := range r.rt.checks {
		if err := chk.Check(ctx, r.sub, checked); err != nil {
			return rejectedBy(chk.Name(), err)
		}
	}
	if r.graph.hasRefs[i] {
		if err := r.rt.checkResolved(ctx, r.sub, checked); err != nil {
			return rejectedBy("permission", err)
		}
	}
	for _, pc := range a.Preconditions {
		v, ok, err := r.rt.State.Get(ctx, r.sub.Tenant, pc.Key)
		if err != nil {
			return rejectedBy("precondition", store.Wrap(fmt.Sprintf("precondition on '%s' could not be checked", pc.Key), err))
		}
		if err := checkPrecondition(pc, v, ok); err != nil {
			return rejectedBy("precondition", err)
		}
	}
	// The scheduler ran every earlier writer of these keys first; a key
	// that is still absent is one nothing provides, and the action would
	// read nothing. simulate reports the same.
	for _, k := range a.StateDependencies {
		_, ok, err := r.rt.State.Get(ctx, r.sub.Tenant, k)
		if err != nil {
			return rejectedBy("state_dependency", store.Wrap(fmt.Sprintf("state dependency '%s' could not be read", k), err))
		}
		if !ok {
			return rejectedBy("state_dependency", fmt.Errorf("state dependency '%s' is not available: no earlier action of this proposal wrote it and state does not hold it", k))
		}
	}
	return nil
}

// act performs the action itself. Its outcome carries an error, or the
// output and the state keys it wrote.
func (r *run) act(ctx context.Context, i int, params map[string]any) outcome {
	a := r.nodes[i].action
	var out outcome
	switch a.Type {
	case protocol.ActionToolCall:
		out.output, out.cacheHit, out.err = r.callTool(ctx, i, params)
	case protocol.ActionStateWrite:
		key, ok := params["key"].(string)
		if !ok {
			out.err = errors.New("state_write needs parameters {key: string, value: any}")
			break
		}
		out.output = params["value"]
		if out.err = r.write(ctx, key, out.output); out.err != nil {
			break
		}
		out.change(key, out.output)
	case protocol.ActionStateRead:
		out.output, out.err = r.readState(ctx, params)
	case protocol.ActionAssertion:
		out.output, out.err = r.assert(ctx, params)
	default:
		out.err = fmt.Errorf("action type '%s' is not one this daemon runs", a.Type)
	}
	return out
}

// assert evaluates an assertion action against state: true, or the reason
// it does not hold.
func (r *run) assert(ctx context.Context, params map[string]any) (any, error) {
	key, ok := params["key"].(string)
	if !ok {
		return nil, errors.New("assertion needs parameters {key: string, operator?: string, value?: any}")
	}
	pc := protocol.Precondition{Key: key, Operator: "eq", Value: params["value"]}
	if op, ok := params["operator"].(string); ok && op != "" {
		pc.Operator = op
	}
	if d, ok := params["description"].(string); ok {
		pc.Description = d
	}
	v, present, err := r.rt.State.Get(ctx, r.sub.Tenant, pc.Key)
	if err != nil {
		return nil, store.Wrap(fmt.Sprintf("assertion on '%s' could not read state", key), err)
	}
	if err := checkPrecondition(pc, v, present); err != nil {
		return nil, fmt.Errorf("assertion failed: %w", err)
	}
	return true, nil
}

// readState is the output of a state_read: the value at key, or an object of
// the values at keys (null where unset).
func (r *run) readState(ctx context.Context, params map[string]any) (any, error) {
	if k, ok := params["key"].(string); ok {
		v, _, err := r.rt.State.Get(ctx, r.sub.Tenant, k)
		if err != nil {
			return nil, store.Wrap(fmt.Sprintf("state_read of '%s'", k), err)
		}
		return v, nil
	}
	out := map[string]any{}
	keys, _ := params["keys"].([]any)
	for _, k := range keys {
		if s, ok := k.(string); ok {
			v, _, err := r.rt.State.Get(ctx, r.sub.Tenant, s)
			if err != nil {
				return nil, store.Wrap(fmt.Sprintf("state_read of '%s'", s), err)
			}
			out[s] = v
		}
	}
	return out, nil
}

// callTool dispatches a tool_call, retrying as its failure_behavior says. An
// idempotent call is answered from the idempotency cache when it can be;
// otherwise it runs under a claim on its key, and its result is committed
// before callTool returns. hit names the cache that answered, if one did.
func (r *run) callTool(ctx context.Context, i int, params map[string]any) (out any, hit string, err error) {
	nd := &r.nodes[i]
	a, t := nd.action, nd.tool
	if t == nil {
		return nil, "", fmt.Errorf("tool '%s' was not resolved at validation", a.Tool)
	}
	if r.rt.tracing() {
		var span trace.Span
		ctx, span = r.rt.startSpan(ctx, r.toolSpanName(i), toolSpanStart...)
		call := &tracedCall{Context: ctx}
		ctx = call
		defer func() { r.endToolSpan(span, i, params, hit, call, err) }()
	}
	if a.Detached() {
		out, err := r.startDetached(ctx, i, params) // no cache can stand for a live invocation
		return out, "", err
	}
	var idemKey string
	var claim store.Claim
	var fence *protocol.Fence
	if idem := r.rt.opts.Idempotency; idem != nil && (a.Idempotent || t.Schema.Idempotent) {
		explicit, _ := a.Metadata["idempotency_key"].(string)
		idemKey = idempotency.Scope{Agent: r.sub.Agent, Tenant: r.sub.Tenant, Tool: a.Tool, Schema: t.digest}.Key(params, explicit)
		// A result an older daemon stored belongs to the plain principal,
		// under the key it had then: read with the claim where the store
		// can, else after it.
		legacy, both := idem.(store.IdempotencyLegacyBeginner)
		both = both && r.sub.Agent == ""
		var out any
		var found bool
		var c store.Claim
		var err error
		if both {
			out, found, c, err = legacy.BeginOrLegacy(ctx, idemKey, idempotency.Key(r.sub.Tenant, a.Tool, params, explicit), a.Tool, r.sub.Proposal.ID)
		} else {
			out, found, c, err = idem.Begin(ctx, idemKey, a.Tool, r.sub.Proposal.ID)
		}
		if err != nil {
			return nil, "", store.Wrap(fmt.Sprintf("tool '%s' was not run: its idempotency key could not be claimed", a.Tool), err)
		}
		if found {
			r.noteDurable(i)
			return out, "idempotency", nil
		}
		if r.sub.Agent == "" && !both {
			// A result an older daemon stored belongs to the plain
			// principal, under the key it had then.
			out, found, err := idem.Result(ctx, idempotency.Key(r.sub.Tenant, a.Tool, params, explicit))
			if err != nil || found {
				c.Release()
			}
			if err != nil {
				return nil, "", store.Wrap(fmt.Sprintf("tool '%s' was not run: the result an older daemon may have stored for it could not be read", a.Tool), err)
			}
			if found {
				r.noteDurable(i)
				return out, "idempotency", nil
			}
		}
		claim = c
		fence = &protocol.Fence{Key: idemKey, Epoch: c.Epoch()}
		// Every way out that does not commit gives the claim up, a panic
		// of the call included.
		defer func() {
			if claim != nil {
				claim.Release()
			}
		}()
	}
	var cacheKey string
	if t.cache != nil {
		cacheKey = string(jsonvalue.Canonical(params))
		if out, ok := t.cache.get(cacheKey, time.Now()); ok {
			return out, "result", nil
		}
	}
	out, err = r.dispatch(ctx, a, t, params, fence)
	if err != nil {
		return nil, "", err
	}
	if claim != nil {
		// The result is committed even when the proposal is being
		// cancelled: the call ran, and a re-submission must find it.
		c := claim
		claim = nil // a Commit ends the claim, whatever it returns
		if err := c.Commit(context.WithoutCancel(ctx), out); err != nil {
			if errors.Is(err, store.ErrSuperseded) {
				r.emit(EventActionSuperseded, a.ID, map[string]any{"tool": a.Tool, "epoch": fence.Epoch})
				return nil, "", fmt.Errorf("superseded: tool '%s' ran under fencing epoch %d, but a newer claim of its idempotency key took the call over while it ran (with the shared store: this daemon stalled past claim_lease); its result was refused and the newer holder's stands: %w", a.Tool, fence.Epoch, err)
			}
			return nil, "", store.Wrap(fmt.Sprintf("tool '%s' ran, but its result could not be committed, so a re-submission may run it again", a.Tool), err)
		}
		r.mu.Lock()
		r.idemKeys = append(r.idemKeys, idemKey)
		r.idemNodes = append(r.idemNodes, i)
		r.mu.Unlock()
	}
	if t.cache != nil {
		t.cache.put(cacheKey, out, time.Now())
	}
	return out, "", nil
}

// noteDurable records that action i was answered from the idempotency
// cache, whose result the reply must wait for (flushDurable).
func (r *run) noteDurable(i int) {
	r.mu.Lock()
	r.idemNodes = append(r.idemNodes, i)
	r.mu.Unlock()
}

// dispatch calls the tool through the session's executor, with retries. An
// output that does not fit the tool's returns schema is a failed attempt.
func (r *run) dispatch(ctx context.Context, a *protocol.Action, t *Tool, params map[string]any, fence *protocol.Fence) (any, error) {
	if r.sub.Session.Executor == nil && !t.builtin && t.exec == nil {
		return nil, errors.New("this session has no way to run tools")
	}
	timeout := r.rt.actionTimeout(a)
	attempts := r.rt.attempts(a)
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			if err := r.beforeRetry(ctx, a, params, attempt, lastErr); err != nil {
				return nil, err
			}
		}
		if err := r.meterCall(); err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%w; retry %d refused: %w", lastErr, attempt, err)
			}
			return nil, err
		}
		if err := r.waitForToken(ctx, a, t); err != nil {
			return nil, err
		}
		out, err := r.attempt(ctx, a, t, params, fence, timeout, attempt)
		if err == nil {
			return out, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, err
		}
	}
	if attempts > 1 {
		return nil, fmt.Errorf("%w (gave up after %d attempts)", lastErr, attempts)
	}
	return nil, lastErr
}

// beforeRetry waits the backoff before an attempt and passes the checks
// again: a rate-limit rule counts attempts, and a rule may have changed
// since the first.
func (r *run) beforeRetry(ctx context.Context, a *protocol.Action, params map[string]any, attempt int, lastErr error) error {
	r.mu.Lock()
	r.retries++
	r.mu.Unlock()
	r.emit(EventActionRetried, a.ID, map[string]any{"tool": a.Tool, "attempt": attempt, "error": LoggedError(lastErr)})
	if r.rt.tracing() {
		spanEvent(ctx, "retry", attribute.Int("car.tool.attempt", attempt), attribute.String("car.tool.previous_error", LoggedError(lastErr)))
	}
	if err := sleepCtx(ctx, r.rt.backoff(attempt-1)); err != nil {
		return fmt.Errorf("%w (retry abandoned: %w)", lastErr, context.Cause(ctx))
	}
	again := *a
	again.Parameters = params
	for _, chk := range r.rt.checks {
		if err := chk.Check(ctx, r.sub, &again); err != nil {
			return fmt.Errorf("%w; retry %d refused: %w", lastErr, attempt, err)
		}
	}
	return nil
}

// waitForToken waits for the tool's rate limit, if it has one. A wait that
// would outlast the proposal's deadline is refused at once, saying how long
// it would be.
func (r *run) waitForToken(ctx context.Context, a *protocol.Action, t *Tool) error {
	if t.limiter == nil {
		return nil
	}
	now := time.Now()
	res := t.limiter.ReserveN(now, 1)
	if !res.OK() {
		return fmt.Errorf("tool '%s' rate limit cannot grant a call", a.Tool)
	}
	wait := res.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && now.Add(wait).After(deadline) {
		res.CancelAt(now)
		return fmt.Errorf("tool '%s' rate limit (%d calls per %gs) would delay this call by %s, past the proposal's deadline in %s (%s): submit it later or raise the limit",
			a.Tool, t.Schema.RateLimit.MaxCalls, t.Schema.RateLimit.IntervalSecs, readable(wait), readable(deadline.Sub(now)), deadline.UTC().Format(time.RFC3339))
	}
	if err := sleepCtx(ctx, wait); err != nil {
		res.Cancel()
		return fmt.Errorf("waiting %s for tool '%s' rate limit: %w", readable(wait), a.Tool, context.Cause(ctx))
	}
	return nil
}

// readable rounds a duration for a message: to the second past a minute,
// else to the millisecond.
func readable(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// attempt makes one call of the tool within timeout.
func (r *run) attempt(ctx context.Context, a *protocol.Action, t *Tool, params map[string]any, fence *protocol.Fence, timeout time.Duration, n int) (any, error) {
	r.mu.Lock()
	r.toolCalls++
	r.mu.Unlock()
	if r.rt.tracing() {
		countAttempt(ctx)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, &toolTimeout{tool: a.Tool, timeout: timeout})
	defer cancel()
	call := ToolCall{
		ProposalID: r.sub.Proposal.ID,
		ActionID:   a.ID,
		Tool:       a.Tool,
		Parameters: params,
		Timeout:    timeout,
		Attempt:    n,
		Fence:      fence,
	}
	var out any
	var err error
	started := time.Now()
	switch {
	case t.builtin:
		out, err = r.rt.sendMessage(cctx, r.sub, call)
	case t.exec != nil:
		start := time.Now()
		out, err = t.exec.ExecuteTool(cctx, call)
		r.emit(EventToolDispatched, a.ID, map[string]any{"tool": a.Tool, "attempt": n, "source": t.source, "connector": t.owner, "latency_ms": time.Since(start).Milliseconds(), "ok": err == nil})
	default:
		out, err = r.sub.Session.Executor.ExecuteTool(cctx, call)
	}
	if err != nil {
		r.recordTrajectory(ctx, a.Tool, n, started, err)
		if cause := context.Cause(cctx); cause != nil {
			r.emit(EventToolCancelled, a.ID, map[string]any{"tool": a.Tool, "attempt": n, "reason": cause.Error()})
			if r.rt.tracing() {
				spanEvent(ctx, "tools.cancel", attribute.Int("car.tool.attempt", n), attribute.String("car.tool.cancel_reason", LoggedError(cause)))
			}
		}
		return nil, err
	}
	r.meterCost(out)
	err = t.ValidateOutput(ctx, out)
	r.recordTrajectory(ctx, a.Tool, n, started, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// toolTimeout is the cause of an attempt that ran out of time; its text is
// made only when it is read.
type toolTimeout struct {
	tool    string
	timeout time.Duration
}

func (e *toolTimeout) Error() string {
	return fmt.Sprintf("tool '%s' timed out after %s (timeout_ms)", e.tool, e.timeout)
}

// actionTimeout is the budget of one attempt of a (for a detached tool: its
// start): its timeout_ms, or the daemon's tool timeout.
func (rt *Runtime) actionTimeout(a *protocol.Action) time.Duration {
	if a.TimeoutMs != nil {
		return protocol.Millis(*a.TimeoutMs)
	}
	return rt.opts.ToolTimeout
}

// backoff is the wait before retry n (1-based): base·2^(n-1), capped.
func (rt *Runtime) backoff(n int) time.Duration {
	d := time.Duration(rt.Harness().RetryBackoffMs) * time.Millisecond
	for k := 1; k < n && d < rt.opts.RetryCap; k++ {
		d *= 2
	}
	return min(d, rt.opts.RetryCap)
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
