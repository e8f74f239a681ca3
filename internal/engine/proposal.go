package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/streams"
	"github.com/parslee-ai/car-server/protocol"
)

// LimitError is a proposal over a configured bound; nothing of it ran.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// Submit validates, admits and executes a proposal and returns its result.
// The error is non-nil only when the proposal could not be considered at all
// (over max_actions); everything else is reported per action, a Cancel
// included.
func (rt *Runtime) Submit(ctx context.Context, sub *Submission) (*protocol.ProposalResult, error) {
	p := sub.Proposal
	if err := rt.CheckActions(p); err != nil {
		return nil, err
	}
	Normalize(p)
	sub.raised = &approvalTally{}
	sub.submissionIntegrity = submissionIntegrity{} // a replan's attempt starts afresh
	var span trace.Span
	if rt.tracing() {
		opts := []trace.SpanStartOption{trace.WithAttributes(proposalAttrs(sub)...)}
		if sub.replaces.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sub.replaces}))
		}
		ctx, span = rt.startSpan(ctx, SpanProposal, opts...)
		sub.span = span.SpanContext()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer rt.running.untrack(p.ID, rt.running.track(p.ID, sub.Session.ID, cancel))
	release := rt.admission.wait(ctx, sub.Session.ID) // while it waits it can be cancelled: it is tracked
	defer release()
	rt.inFlight.Add(1)
	defer rt.inFlight.Add(-1)
	rt.restoring.RLock() // a checkpoint restore waits for no proposal: it is refused while any runs
	defer rt.restoring.RUnlock()
	r := newRun(rt, sub)
	sub.graph = r.graph
	// What the store keeps of this run between its claims and its Flush is
	// this run's, not every run's with the same (client-chosen) id.
	ctx = store.WithRun(ctx, rt.runs.Add(1))
	received := map[string]any{"actions": len(p.Actions), "source": p.Source, "tenant": sub.Tenant, "transaction_check": rt.TransactionCheck(sub.Session)}
	if len(sub.Claims) > 0 {
		received["claims"] = sub.Claims
		received["claims_trusted"] = sub.ClaimsTrusted
	}
	if sub.span.IsValid() {
		received["trace_id"] = sub.span.TraceID().String() // what a trace backend finds the proposal by
	}
	r.emit(EventProposalReceived, "", received)

	for i := range p.Actions {
		if r.graph.rejected[i] != "" {
			continue
		}
		if err := r.validateAction(ctx, i); err != nil {
			r.graph.reject(i, err.Error())
			r.nodes[i].invalid = err
		}
	}
	r.graph.cascade()

	blocked := false
	for _, gate := range rt.gates {
		if err := rt.admit(ctx, gate, sub); err != nil {
			r.emit(EventProposalRejected, "", map[string]any{"gate": gate.Name(), "reason": err.Error()})
			for i := range r.nodes {
				r.finish(i, *rejectedBy(gate.Name(), err))
			}
			blocked = true
			break
		}
	}
	if !blocked {
		for i, reason := range r.graph.rejected {
			if reason != "" {
				err := r.nodes[i].invalid // keeps a schema violation's type, for the event
				if err == nil || err.Error() != reason {
					err = errors.New(reason)
				}
				r.finish(i, *rejectedBy("validator", err))
			}
		}
		r.execute(ctx)
	}
	r.flushDurable(ctx)
	res := r.result()
	rt.noteFlow(sub, res)
	rt.noteIntegrity(context.WithoutCancel(ctx), sub, res) // the ledger records the writes even when the client went away
	r.emit(EventProposalFinished, "", map[string]any{
		"tool_calls": res.Cost.ToolCalls, "executed": res.Cost.ActionsExecuted,
		"rejected": res.Cost.ActionsRejected, "skipped": res.Cost.ActionsSkipped,
		"duration_ms": res.Cost.TotalDurationMs,
	})
	if span != nil {
		endProposalSpan(span, res)
	}
	return res, nil
}

// admit runs one admission gate, in a span of its own when tracing.
func (rt *Runtime) admit(ctx context.Context, gate AdmissionGate, sub *Submission) error {
	if !rt.tracing() {
		return gate.Admit(ctx, sub)
	}
	name := gate.Name()
	ctx, span := rt.startSpan(ctx, SpanGate+name, trace.WithAttributes(AttrGate.String(name)))
	err := gate.Admit(ctx, sub)
	endGateSpan(span, err)
	return err
}

// Normalize mints the ids a proposal left out.
func Normalize(p *protocol.ActionProposal) {
	if p.ID == "" {
		p.ID = shortID()
	}
	if p.Timestamp == "" {
		p.Timestamp = time.Now().UTC().Format(time.RFC3339)
	}
	for i := range p.Actions {
		if p.Actions[i].ID == "" {
			p.Actions[i].ID = shortID()
		}
	}
}

// shortID is 12 hex characters of a random UUID.
func shortID() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
}

// node is one action's execution record.
type node struct {
	action  *protocol.Action
	tool    *Tool
	invalid error // why validateAction rejected it, nil if it did not
	done    bool
	result  protocol.ActionResult
}

// run is the execution of one proposal.
type run struct {
	rt    *Runtime
	sub   *Submission
	graph *graph
	nodes []node
	start time.Time

	mu        sync.Mutex // guards outputs, undo, counters and node results
	outputs   map[string]any
	undo      []undoEntry
	toolCalls int
	retries   int
	idemKeys  []string                      // idempotency results this proposal recorded
	idemNodes []int                         // actions answered from or committed to the idempotency cache, for flushDurable
	handles   map[string]*streams.Handle    // action id → its detached invocation; nil until one starts
	started   map[startedKey]map[string]any // the data of the action_started events, by type and tool
	results   map[string]any                // action id → its awaited stream's result; nil until one ends
	sizes     map[refKey]int64              // encoded sizes of outputs and stream results, counted once (outputSize)

	resolved atomic.Int64 // bytes of parameters resolved from references so far

	overBudget error // the cost budget refusal that stops the run (costbudget.go); guarded by mu
}

// undoEntry puts one key back as it was before one write of the proposal,
// if the key still holds that write (version).
type undoEntry struct {
	key     string
	version uint64
	prior   store.Prior
}

func newRun(rt *Runtime, sub *Submission) *run {
	p := sub.Proposal
	r := &run{
		rt:      rt,
		sub:     sub,
		graph:   buildGraph(p.Actions),
		nodes:   make([]node, len(p.Actions)),
		start:   time.Now(),
		outputs: make(map[string]any, len(p.Actions)),
	}
	for i := range p.Actions {
		r.nodes[i].action = &p.Actions[i]
	}
	return r
}

// validateAction is the static check of one action: its tool exists, its
// parameters fit the tool's schema, the built-in action types have the
// parameters they need. It returns why the action is rejected, or nil.
func (r *run) validateAction(ctx context.Context, i int) error {
	a := r.nodes[i].action
	switch a.Type {
	case protocol.ActionToolCall:
		t, ok := r.sub.Session.Tools.Lookup(a.Tool)
		if !ok {
			return errors.New(r.sub.Session.Tools.UnknownTool(a.Tool))
		}
		r.nodes[i].tool = t
		if a.Detached() && t.Schema.Idempotent {
			return errors.New(detachedIdempotent(a))
		}
		if !r.graph.hasRefs[i] {
			return t.ValidateParams(ctx, any(a.Parameters))
		}
	default:
		if problem := builtinParamsProblem(a.Type, a.Parameters); problem != "" {
			return errors.New(problem)
		}
	}
	return nil
}

// builtinParamsProblem checks the parameters of the actions the engine runs
// itself. It runs at validation and again once references are resolved (a
// reference can resolve to anything).
func builtinParamsProblem(t protocol.ActionType, params map[string]any) string {
	switch t {
	case protocol.ActionStateWrite:
		if k, _ := params["key"].(string); k == "" {
			return "state_write needs parameters {key: string, value: any}"
		}
	case protocol.ActionStateRead:
		_, one := params["key"].(string)
		keys, many := params["keys"].([]any)
		for _, k := range keys {
			if _, ok := k.(string); !ok {
				many = false
			}
		}
		if !one && !many {
			return "state_read needs parameters {key: string} or {keys: string[]}"
		}
	case protocol.ActionAssertion:
		if k, _ := params["key"].(string); k == "" {
			return "assertion needs parameters {key: string, operator?: string, value?: any}"
		}
	}
	return ""
}

// execute runs the admitted actions in dependency order, at most
// MaxConcurrency at once. The first action that fails with abort (or
// exhausts its retries) stops scheduling, and so does the end of the
// proposal's context: what has not started is skipped, what is running is
// cancelled, and the proposal's state writes are undone.
func (r *run) execute(parent context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)

	sched := newSchedule(r)
	// Actions that run alongside others run on workers, at most
	// MaxConcurrency of them, each taking one action after another: a
	// worker's stack has grown to what an action needs once, not once per
	// action, and the workers are the Runtime's, so not once per run
	// either. Both channels hold up to MaxConcurrency, so that neither the
	// scheduler nor a worker ever waits on the other to hand over.
	limit := r.rt.opts.MaxConcurrency
	work := make(chan int, limit)
	doneCh := make(chan int, limit)
	var workers sync.WaitGroup
	defer func() {
		close(work)
		workers.Wait() // idle by now: every action handed over has reported
	}()
	started := 0
	running := 0
	var stop *stopReason
	for {
		if stop == nil && running == 0 && len(sched.ready) == 1 {
			// The only action that can run now, with nothing else running:
			// no other action can become ready before it ends, so it runs
			// here rather than on a goroutine of its own, and a chain of
			// dependent actions takes no goroutine hand-off per step.
			i, _ := sched.next()
			r.runGuarded(ctx, i)
			if stop = r.settle(parent, sched, i); stop != nil {
				cancel(stop.cause)
			}
			continue
		}
		for stop == nil && running < limit {
			i, ok := sched.next()
			if !ok {
				break
			}
			running++
			if started < running {
				started++
				workers.Add(1)
				r.rt.workers.run(func() {
					defer workers.Done()
					for i := range work {
						r.runGuarded(ctx, i)
						doneCh <- i
					}
				})
			}
			work <- i
		}
		if running == 0 {
			break
		}
		i := <-doneCh
		running--
		if stop == nil {
			if stop = r.settle(parent, sched, i); stop != nil {
				cancel(stop.cause)
			}
		}
	}
	if stop == nil || (!stop.byOutcome && !r.anyUnfinishedOrFailed()) {
		return // nothing stopped, or stopped only after every action had succeeded
	}
	for i := range r.nodes {
		if !r.isDone(i) {
			r.finish(i, outcome{status: protocol.StatusSkipped, err: fmt.Errorf("not started: %w", stop.cause)})
		}
	}
	// The rollback runs even though the proposal's context may have ended:
	// it is what puts state back.
	r.rollback(context.WithoutCancel(parent), stop.cause)
}

// runGuarded runs action i; a panic in it fails the action instead of
// taking the daemon down.
func (r *run) runGuarded(ctx context.Context, i int) {
	defer func() {
		if p := recover(); p != nil {
			r.finish(i, outcome{status: protocol.StatusFailed, err: fmt.Errorf("internal error while running this action: %v", p)})
		}
	}()
	r.runAction(ctx, i)
}

// stopReason is why a run stopped before every action ran.
type stopReason struct {
	cause     error
	byOutcome bool // an action's outcome stopped it, not the proposal's context
}

// settle takes in the outcome of action i: its dependents become ready, a
// skip spreads downstream, and anything else stops the run. The end of the
// proposal's context stops it too.
func (r *run) settle(parent context.Context, sched *schedule, i int) *stopReason {
	if parent.Err() != nil {
		return &stopReason{cause: fmt.Errorf("proposal stopped: %w", context.Cause(parent))}
	}
	if err := r.budgetStop(); err != nil {
		return &stopReason{cause: err, byOutcome: true}
	}
	a := r.nodes[i].action
	switch res := r.nodeResult(i); {
	case res.Status == protocol.StatusSucceeded:
		sched.release(i)
	case a.FailureBehavior == protocol.FailSkip:
		r.skipDownstream(i)
	default:
		return &stopReason{cause: fmt.Errorf("proposal aborted: action '%s' %s", a.ID, res.Status), byOutcome: true}
	}
	return nil
}

// schedule is the ready set of a run: actions whose dependencies all
// succeeded, in the order they became ready.
type schedule struct {
	r     *run
	indeg []int
	ready []int
}

func newSchedule(r *run) *schedule {
	// No action becomes ready twice, so ready never holds more than there
	// are actions in all: it shares one allocation with indeg and never
	// grows.
	n := len(r.nodes)
	buf := make([]int, 2*n)
	s := &schedule{r: r, indeg: buf[:n:n], ready: buf[n:n]}
	for i := range r.nodes {
		if r.nodes[i].done {
			continue
		}
		s.indeg[i] = len(r.graph.deps[i])
		if s.indeg[i] == 0 {
			s.ready = append(s.ready, i)
		}
	}
	return s
}

// next takes the next ready action.
func (s *schedule) next() (int, bool) {
	if len(s.ready) == 0 {
		return 0, false
	}
	i := s.ready[0]
	s.ready = s.ready[1:]
	return i, true
}

// release counts action i's success towards its dependents.
func (s *schedule) release(i int) {
	for _, d := range s.r.graph.dependents[i] {
		if s.indeg[d]--; s.indeg[d] == 0 && !s.r.isDone(d) {
			s.ready = append(s.ready, d)
		}
	}
}

// skipDownstream marks everything that waits on a skipped action as skipped.
func (r *run) skipDownstream(i int) {
	queue := []int{i}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		for _, d := range r.graph.dependents[j] {
			if r.isDone(d) {
				continue
			}
			r.finish(d, outcome{status: protocol.StatusSkipped, err: fmt.Errorf("not started: dependency '%s' did not succeed", r.nodes[j].action.ID)})
			queue = append(queue, d)
		}
	}
}

// anyUnfinishedOrFailed reports whether some action has no outcome yet or
// failed: a stopped run that left one needs its rollback, as an aborted one
// does.
func (r *run) anyUnfinishedOrFailed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.nodes {
		if !r.nodes[i].done || r.nodes[i].result.Status == protocol.StatusFailed {
			return true
		}
	}
	return false
}

func (r *run) isDone(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[i].done
}

func (r *run) nodeResult(i int) protocol.ActionResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[i].result
}

// finish records an action's outcome and its event; an action finishes once.
func (r *run) finish(i int, out outcome) {
	now := time.Now()
	r.mu.Lock()
	nd := &r.nodes[i]
	if nd.done {
		r.mu.Unlock()
		return
	}
	nd.done = true
	nd.result.ActionID = nd.action.ID
	nd.result.Status = out.status
	nd.result.Output = out.output
	nd.result.CacheHit = out.cacheHit
	var errText string
	if out.err != nil {
		nd.result.Error = new(out.err.Error())
		errText = LoggedError(out.err)
	}
	nd.result.StateChanges = out.changes
	if nd.result.StateChanges == nil {
		nd.result.StateChanges = noChanges
	}
	nd.result.Timestamp = now.UTC().Format(time.RFC3339Nano)
	if out.status == protocol.StatusSucceeded {
		r.outputs[nd.action.ID] = out.output
	}
	duration := nd.result.DurationMs
	r.mu.Unlock()

	data := make(map[string]any, 4)
	data["type"], data["duration_ms"] = typeValue(nd.action.Type), duration
	if nd.action.Tool != "" {
		data["tool"] = r.toolValue(i)
	}
	if n, ok := resultCount(out.output); ok && out.status == protocol.StatusSucceeded && nd.action.Type == protocol.ActionToolCall {
		data["result_count"] = n
	}
	if out.gate != "" {
		data["gate"] = out.gate
	}
	if out.cacheHit != "" {
		data["cache_hit"] = out.cacheHit
	}
	if errText != "" {
		data["error"] = errText
	}
	r.emit(statusEvents[out.status], nd.action.ID, data)
	r.recordTurn(nd.action, out)
}

// noChanges is the state changes of every action that wrote none: one
// empty map, since a result's changes are only read once it is recorded.
var noChanges = map[string]any{}

// statusEvents is the event each final status is recorded with.
var statusEvents = map[protocol.ActionStatus]EventKind{
	protocol.StatusSucceeded: EventActionSucceeded,
	protocol.StatusFailed:    EventActionFailed,
	protocol.StatusRejected:  EventActionRejected,
	protocol.StatusSkipped:   EventActionSkipped,
}

// output returns the output of a succeeded action, or with result set the
// result of its stream an await has seen end, for references.
func (r *run) output(id string, result bool) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if result {
		v, ok := r.results[id]
		return v, ok
	}
	v, ok := r.outputs[id]
	return v, ok
}

// refKey names what a whole reference reads: an action's output, or with
// result set, its awaited stream's result.
type refKey struct {
	id     string
	result bool
}

// outputSize is the encoded size of v, the output (or stream result) of
// action id, counted once for the run: a chain of actions that each refer
// to the last output twice costs a lookup per reference, not a walk. A
// count stops past max_resolved_action_bytes, which is all a reference to
// it needs to know.
func (r *run) outputSize(id string, result bool, v any) int64 {
	k := refKey{id, result}
	r.mu.Lock()
	n, ok := r.sizes[k]
	r.mu.Unlock()
	if ok {
		return n
	}
	n = jsonvalue.Size(v, r.rt.opts.MaxResolvedActionBytes)
	r.knowSize(k, n)
	return n
}

// knowSize records the encoded size of an output that is known without
// counting it: a state_write's, summed as its value was resolved.
func (r *run) knowSize(k refKey, n int64) {
	r.mu.Lock()
	if r.sizes == nil {
		r.sizes = map[refKey]int64{}
	}
	r.sizes[k] = n
	r.mu.Unlock()
}

// write sets a state key, remembering how to undo exactly this write. The
// write and its undo entry are one step under r.mu, so undo entries are in
// the order the writes happened even when actions of this proposal write one
// key concurrently. A write the store did not commit leaves no undo entry.
func (r *run) write(ctx context.Context, key string, value any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	version, prior, err := r.rt.State.Write(ctx, r.sub.Tenant, key, value)
	if err != nil {
		return store.Wrap(fmt.Sprintf("state key '%s' was not written", key), err)
	}
	r.undo = append(r.undo, undoEntry{key: key, version: version, prior: prior})
	return nil
}

// flushDurable makes the idempotent results this proposal committed or
// read durable before it is answered, when the store defers their flush
// to here (store.IdempotencyFlusher: the file store under journal_sync =
// proposal). If the flush fails, those actions are reported failed: their
// results may not survive a power loss, so the reply must not present
// them as done.
func (r *run) flushDurable(ctx context.Context) {
	f, ok := r.rt.opts.Idempotency.(store.IdempotencyFlusher)
	r.mu.Lock()
	nodes := r.idemNodes
	r.mu.Unlock()
	if !ok || len(nodes) == 0 {
		return
	}
	err := f.Flush(context.WithoutCancel(ctx), r.sub.Proposal.ID)
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range nodes {
		nd := &r.nodes[i]
		if nd.result.Status != protocol.StatusSucceeded {
			continue
		}
		nd.result.Status = protocol.StatusFailed
		nd.result.Output = nil
		nd.result.Error = new(store.Wrap(fmt.Sprintf("tool '%s' ran, but its result could not be flushed to disk, so a re-submission may run it again", nd.action.Tool), err).Error())
	}
}

// rollback undoes this proposal's state writes, newest first, and
// invalidates the idempotent results it recorded (tombstones), so that a
// re-submission runs them again rather than resuming a half-undone plan. A
// key that another writer has changed since this proposal wrote it keeps
// that writer's value: rollback restores only its own writes. A key the
// store could not restore is listed as failed, with the error.
func (r *run) rollback(ctx context.Context, cause error) {
	r.mu.Lock()
	undo := r.undo
	r.undo = nil
	keys := r.idemKeys
	r.idemKeys = nil
	r.mu.Unlock()
	if r.rt.tracing() && (len(keys) > 0 || len(undo) > 0) {
		var span trace.Span
		ctx, span = r.rt.startSpan(ctx, SpanRollback, trace.WithAttributes(AttrProposalID.String(r.sub.Proposal.ID), AttrRollbackKeys.Int(len(undo)), attribute.String("car.rollback.cause", LoggedError(cause))))
		defer span.End()
	}
	if len(keys) > 0 {
		err := r.rt.opts.Idempotency.Invalidate(ctx, keys, r.sub.Proposal.ID)
		data := map[string]any{"count": len(keys), "reason": LoggedError(cause)}
		if err != nil {
			data["error"] = err.Error()
		}
		r.emit(EventIdempotencyInvalidated, "", data)
	}
	if len(undo) == 0 {
		return
	}
	restored := make([]string, 0, len(undo))
	kept := []string{}
	var failed []string
	var failure error
	for i := len(undo) - 1; i >= 0; i-- {
		u := undo[i]
		ok, err := r.rt.State.Restore(ctx, r.sub.Tenant, u.key, u.version, u.prior)
		switch {
		case err != nil:
			failed = append(failed, u.key)
			if failure == nil {
				failure = store.Wrap(fmt.Sprintf("state key '%s' was not restored", u.key), err)
			}
		case ok:
			restored = append(restored, u.key)
		default:
			kept = append(kept, u.key)
		}
	}
	data := map[string]any{"keys": restored, "kept": kept, "reason": LoggedError(cause), "tenant": r.sub.Tenant}
	if failure != nil {
		data["failed"] = failed
		data["error"] = failure.Error()
	}
	r.emit(EventStateRolledBack, "", data)
}

func (r *run) emit(kind EventKind, actionID string, data map[string]any) {
	// A bound agent is its own caller: its events carry agent alone.
	if r.sub.Agent != "" || r.sub.Caller != "" {
		if data == nil {
			data = map[string]any{}
		}
		if r.sub.Agent != "" {
			data["agent"] = r.sub.Agent
		} else {
			data["caller"] = r.sub.Caller
		}
	}
	r.rt.Events.Append(Event{Kind: kind, ProposalID: r.sub.Proposal.ID, ActionID: actionID, Connection: r.sub.Session.ID, Data: data})
}

// result assembles the ProposalResult in proposal order.
func (r *run) result() *protocol.ProposalResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &protocol.ProposalResult{ProposalID: r.sub.Proposal.ID, Results: make([]protocol.ActionResult, len(r.nodes))}
	for i := range r.nodes {
		ar := r.nodes[i].result
		res.Results[i] = ar
		switch ar.Status {
		case protocol.StatusSucceeded, protocol.StatusFailed:
			res.Cost.ActionsExecuted++
		case protocol.StatusRejected:
			res.Cost.ActionsRejected++
		case protocol.StatusSkipped:
			res.Cost.ActionsSkipped++
		}
	}
	res.Cost.ToolCalls = r.toolCalls
	res.Cost.Retries = r.retries
	res.Cost.TotalDurationMs = MsSince(r.start)
	return res
}

// MsSince is the time since t in milliseconds, to the microsecond: the unit
// of every duration_ms the daemon reports or logs.
func MsSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}
