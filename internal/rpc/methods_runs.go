package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/fanout"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Agent run traces (runs.*). Reads and subscriptions need the run's own
// agent (a connection bound to it) or the host role; the one write,
// runs.record_turns, needs the run's own agent only. An unknown run and a
// run the caller may not see get the same answer: no oracle.

// runStore is the store, or the error every runs method answers without one.
func (c *conn) runStore() (*runs.Store, error) {
	if c.srv.opts.Runs == nil {
		return nil, internalError("run traces are off on this daemon")
	}
	return c.srv.opts.Runs, nil
}

// isUnavailable reports whether err came from a store that cannot be reached.
func isUnavailable(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// mayRead reports whether the connection may see agent's runs.
func (c *conn) mayRead(agent string) bool {
	return c.isHost() || (agent != "" && c.agentID() == agent)
}

// errRunNotFound is the uniform answer for an unknown or unauthorized run.
func errRunNotFound(runID string) error {
	return invalidParams("run '%s' not found (or not this connection's to see)", runID)
}

const runsStartShape = "{intent: string, agent_id?: string, agent_name?: string, outcome_description?: string, idempotency_key?: string}"

func (c *conn) runsStart(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	var p protocol.RunsStartParams
	if err := decodeParams(params, &p, runsStartShape); err != nil {
		return nil, err
	}
	if err := requireString("intent", p.Intent, runsStartShape); err != nil {
		return nil, err
	}
	agent, err := c.runAgent(p.AgentID, p.AgentName)
	if err != nil {
		return nil, err
	}
	runID, _, err := st.Start(ctx, runs.Start{RunID: p.IdempotencyKey, AgentID: agent, AgentName: p.AgentName, Intent: p.Intent, OutcomeDescription: p.OutcomeDescription, Owner: c.id})
	switch {
	case isUnavailable(err):
		return nil, storeError("runs.start", "no run was started", err)
	case errors.Is(err, runs.ErrNotFound):
		return nil, invalidParams("runs.start: idempotency_key '%s' names a run of another agent; use another key", p.IdempotencyKey)
	case err != nil:
		return nil, invalidParams("runs.start: %v", err)
	}
	// The current run is set before the reply, so a proposal submitted
	// right after the ack is recorded in it.
	c.runs.mu.Lock()
	c.runs.current = runID
	if c.runs.started == nil {
		c.runs.started = map[string]bool{}
	}
	c.runs.started[runID] = true
	c.runs.mu.Unlock()
	return protocol.RunsStartResult{AgentID: agent, RunID: runID}, nil
}

// runAgent resolves who a new run belongs to: a bound connection's own
// agent; any named agent for the host role; for an unbound connection, an
// id synthesized from agent_name, never one it names.
func (c *conn) runAgent(named, name string) (string, error) {
	bound := c.agentID()
	switch {
	case named != "" && (named == bound || c.isHost()):
		return named, nil
	case named != "":
		return "", invalidParams("runs.start: this connection may not start runs for agent '%s': bind it with session.auth {token, agent_id}, or omit agent_id and give agent_name", named)
	case bound != "":
		return bound, nil
	case name != "":
		if slug := slugify(name); slug != "" {
			return "name:" + slug, nil
		}
		return "", invalidParams("runs.start: agent_name '%s' has no letters or digits to make an id from", name)
	}
	return "", invalidParams("runs.start: the run has no agent: bind the connection (session.auth {token, agent_id}), or give agent_id (host role) or agent_name")
}

// slugify is agent_name's id form: lowercase letters and digits, runs of
// anything else as one '-'.
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if len(s) > 64 {
		s = strings.TrimSuffix(s[:64], "-")
	}
	return s
}

// mayWrite reports whether the connection may end or append to a run of
// agent started by owner: its bound agent, or (runs.complete only) the
// connection that started it.
func (c *conn) mayWrite(agent, owner string, byOwnerConn bool) bool {
	if a := c.agentID(); a != "" && a == agent {
		return true
	}
	return byOwnerConn && owner == c.id
}

const runsCompleteShape = "{run_id: string, outcome: AgentOutcome}"

func (c *conn) runsComplete(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	var p protocol.RunsCompleteParams
	if err := decodeParams(params, &p, runsCompleteShape); err != nil {
		return nil, err
	}
	if err := requireString("run_id", p.RunID, runsCompleteShape); err != nil {
		return nil, err
	}
	agent, owner, err := st.Info(ctx, p.RunID)
	if isUnavailable(err) {
		return nil, storeError("runs.complete", "the run was not completed", err)
	}
	if err != nil || !c.mayWrite(agent, owner, true) {
		return nil, errRunNotFound(p.RunID)
	}
	if err := st.Complete(ctx, p.RunID, p.Outcome); err != nil {
		switch {
		case errors.Is(err, runs.ErrNotFound):
			return nil, errRunNotFound(p.RunID)
		case isUnavailable(err):
			return nil, storeError("runs.complete", "the run was not completed", err)
		}
		return nil, invalidParams("runs.complete: %v", err)
	}
	c.runs.mu.Lock()
	if c.runs.current == p.RunID {
		c.runs.current = ""
	}
	delete(c.runs.started, p.RunID)
	c.runs.mu.Unlock()
	return protocol.RunsCompleteResult{OK: true, RunID: p.RunID}, nil
}

const recordTurnsShape = "runs.record_turns requires { run_id, turns: [RunTurn] }"

func (c *conn) runsRecordTurns(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	var p protocol.RunsRecordTurnsParams
	if params == nil || json.Unmarshal(*params, &p) != nil || p.RunID == "" {
		return nil, invalidParams("%s", recordTurnsShape)
	}
	turns, err := runs.DecodeTurns(json.RawMessage(p.Turns))
	if err != nil {
		return nil, invalidParams("%s: %v", recordTurnsShape, err)
	}
	dropped := func(reason string) any {
		return protocol.RunsRecordTurnsResult{Dropped: reason, RunID: p.RunID}
	}
	agent, owner, err := st.Info(ctx, p.RunID)
	if isUnavailable(err) {
		return nil, storeError("runs.record_turns", "no turn was recorded", err)
	}
	if err != nil || !c.mayWrite(agent, owner, false) {
		return dropped(runs.DropRunNotFound), nil
	}
	base, err := st.Append(ctx, p.RunID, turns)
	var drop *runs.DropError
	switch {
	case errors.As(err, &drop):
		return dropped(drop.Reason), nil
	case isUnavailable(err):
		return nil, storeError("runs.record_turns", "no turn was recorded", err)
	case err != nil:
		return nil, internalError("runs.record_turns: %v", err)
	}
	c.meterTurns(agent, p.RunID, turns)
	return protocol.RunsRecordTurnsResult{BaseIndex: base, Count: len(turns), OK: true, RunID: p.RunID}, nil
}

// meterTurns records the spend turns report, folded into cost by agent.
func (c *conn) meterTurns(agent, runID string, turns []runs.Turn) {
	for _, t := range turns {
		if t.Tokens == nil {
			continue
		}
		c.srv.rt.Events.Append(engine.Event{Kind: engine.EventInferenceMetered, Connection: c.id, Data: map[string]any{
			"agent": agent, "run_id": runID, "turn": t.Index, "tokens_in": t.Tokens.InputTokens, "tokens_out": t.Tokens.OutputTokens, "cost_usd": t.Tokens.CostUSD,
		}})
	}
}

func (c *conn) runsSubscribe(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	runID, err := stringParam(params, "run_id")
	if err != nil {
		return nil, err
	}
	agent, _, err := st.Info(ctx, runID)
	if isUnavailable(err) {
		return nil, storeError("runs.subscribe", "nothing was subscribed to", err)
	}
	if err != nil || !c.mayRead(agent) {
		return nil, errRunNotFound(runID)
	}
	c.runs.mu.Lock()
	if c.runs.subs == nil {
		c.runs.subs = map[string]*fanout.Queue[runs.Event]{}
	}
	q := c.runs.subs[runID]
	if q == nil {
		q = fanout.New(c.deliverTrace, c.feedOptions())
		c.runs.subs[runID] = q
	}
	c.runs.mu.Unlock()
	snap, err := st.Subscribe(ctx, runID, c.id, q.Push)
	var elsewhere *runs.ElsewhereError
	switch {
	case errors.As(err, &elsewhere):
		return nil, invalidParams("runs.subscribe: %v", err)
	case isUnavailable(err):
		return nil, storeError("runs.subscribe", "nothing was subscribed to", err)
	case err != nil:
		return nil, errRunNotFound(runID)
	}
	return protocol.RunSnapshot{RunID: snap.RunID, AgentID: snap.AgentID, TurnsSoFar: wireRecords(snap.TurnsSoFar), Cursor: snap.Cursor, Status: snap.Status}, nil
}

// deliverTrace writes one runs.trace.event. Its cursor is the run's turn
// count: a gap there is a dropped event, and the subscriber re-subscribes.
func (c *conn) deliverTrace(ctx context.Context, it fanout.Item[runs.Event]) error {
	e := it.Value
	return c.notify(ctx, protocol.MethodRunsTraceEvent, protocol.RunTraceEvent{RunID: e.RunID, AgentID: e.AgentID, Record: wireRecord(e.Record), Cursor: e.Cursor, Status: e.Status})
}

// wireRecord is a stored run record as the wire carries it.
func wireRecord(r runs.Record) protocol.RunRecord {
	w := protocol.RunRecord{
		Record: r.Record, RunID: r.RunID, AgentID: r.AgentID, AgentName: r.AgentName, Intent: r.Intent,
		OutcomeDescription: r.OutcomeDescription, StartedAt: r.StartedAt,
		Status: r.Status, Outcome: r.Outcome, EndedAt: r.EndedAt,
	}
	if t := r.Turn; t != nil {
		w.Index = &t.Index
		w.Prompt, w.Tool, w.Parameters, w.Output = t.Prompt, t.Tool, t.Parameters, t.Output
		w.CliOutcome, w.VerifierVerdict, w.PolicyRejected, w.Tokens = t.CliOutcome, t.VerifierVerdict, t.PolicyRejected, t.Tokens
	}
	return w
}

// wireRecords is wireRecord of each record; nil stays nil.
func wireRecords(recs []runs.Record) []protocol.RunRecord {
	if recs == nil {
		return nil
	}
	out := make([]protocol.RunRecord, len(recs))
	for i, r := range recs {
		out[i] = wireRecord(r)
	}
	return out
}

func (c *conn) runsUnsubscribe(_ context.Context, params *json.RawMessage) (any, error) {
	runID, err := stringParam(params, "run_id")
	if err != nil {
		return nil, err
	}
	removed := false
	if st := c.srv.opts.Runs; st != nil {
		removed = st.Unsubscribe(runID, c.id)
	}
	c.runs.mu.Lock()
	q := c.runs.subs[runID]
	delete(c.runs.subs, runID)
	c.runs.mu.Unlock()
	if q != nil {
		q.Close()
	}
	return protocol.RunsUnsubscribeResult{Removed: removed, RunID: runID}, nil
}

func (c *conn) runsList(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	agentID, err := stringParam(params, "agent_id")
	if err != nil {
		return nil, err
	}
	if !c.mayRead(agentID) {
		return nil, invalidParams("runs.list: this connection may not read agent '%s''s runs: bind it to that agent, or authenticate with the host token", agentID)
	}
	list, err := st.List(ctx, agentID)
	if err != nil {
		return nil, storeError("runs.list", "nothing was read", err)
	}
	return protocol.RunsListResult{AgentID: agentID, Runs: list}, nil
}

func (c *conn) runsGetTrace(ctx context.Context, params *json.RawMessage) (any, error) {
	st, err := c.runStore()
	if err != nil {
		return nil, err
	}
	var p protocol.RunsGetTraceParams
	const shape = "{run_id: string, cursor?: number}"
	if err := decodeParams(params, &p, shape); err != nil {
		return nil, err
	}
	if err := requireString("run_id", p.RunID, shape); err != nil {
		return nil, err
	}
	if p.Cursor < 0 {
		return nil, invalidParams("param 'cursor' must be 0 or more")
	}
	notFound := protocol.RunsGetTraceResult{NotFound: true, RunID: p.RunID}
	agent, _, err := st.Info(ctx, p.RunID)
	if isUnavailable(err) {
		return nil, storeError("runs.get_trace", "nothing was read", err)
	}
	if err != nil || !c.mayRead(agent) {
		return notFound, nil
	}
	recs, err := st.Trace(ctx, p.RunID, p.Cursor)
	if errors.Is(err, runs.ErrNotFound) {
		return notFound, nil
	}
	if isUnavailable(err) {
		return nil, storeError("runs.get_trace", "nothing was read", err)
	}
	if err != nil {
		return nil, internalError("runs.get_trace: %v", err)
	}
	return protocol.RunsGetTraceResult{AgentID: agent, Cursor: &p.Cursor, Records: wireRecords(recs), RunID: p.RunID}, nil
}

// A run's recorder names its run, so the proposal's spans carry the run id.
var _ engine.RunNamer = (*runs.Recorder)(nil)

// recorder is the turn recorder of the connection's current run, or nil.
func (c *conn) recorder() engine.TurnRecorder {
	st := c.srv.opts.Runs
	c.runs.mu.Lock()
	runID := c.runs.current
	c.runs.mu.Unlock()
	if st == nil || runID == "" {
		return nil
	}
	rec := st.Recorder(runID)
	rec.OnError = func(err error) { c.log.Warn("a proposal's turn was not recorded: " + err.Error()) }
	return rec
}
