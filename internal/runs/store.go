package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Options configure a Store. Zero values take the defaults noted.
type Options struct {
	// Grace is how long a run whose connection went away without
	// runs.complete waits before it is marked incomplete (10 s).
	Grace time.Duration
	// CloseLog, when set, is called by Close once the store has stopped:
	// an opener that hands the log over with the store sets it. Nil: the
	// opener closes the log after the Store.
	CloseLog func() error
	// MaxPerAgent bounds the runs one agent has in progress on this
	// daemon (DefaultMaxPerAgent); MaxInProgress bounds them for all
	// agents together (DefaultMaxInProgress). Past either, Start refuses.
	MaxPerAgent, MaxInProgress int
	// MaxIntentBytes bounds a run's intent, agent name and outcome
	// description, and MaxOutcomeBytes its outcome (DefaultMaxTextBytes
	// each).
	MaxIntentBytes, MaxOutcomeBytes int
}

// DefaultGrace is Options.Grace when zero, and the daemon's
// run_incomplete_grace when not set.
const DefaultGrace = 10 * time.Second

// The bounds' defaults, for the Options fields left zero and the daemon's
// settings (max_runs_per_agent, max_runs_in_progress, max_run_intent_bytes,
// max_run_outcome_bytes).
const (
	DefaultMaxPerAgent   = 64
	DefaultMaxInProgress = 4096 // 64 agents at their own bound
	DefaultMaxTextBytes  = 256 << 10
)

// DropError is a record_turns batch refused whole; Reason is one of the
// Drop constants.
type DropError struct{ Reason string }

func (e *DropError) Error() string { return "turns dropped: " + e.Reason }

// ElsewhereError refuses a subscription to a run in progress on another
// daemon: its live records are published there.
type ElsewhereError struct{ RunID, Node string }

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("run %s is in progress on daemon %s; subscribe through a connection to that daemon, or read it with runs.get_trace", e.RunID, e.Node)
}

// Store is the daemon's run traces over a run log (a Log): the
// runs in progress on this daemon, each with its writer slot, and the
// subscriptions to runs. It is safe for concurrent use.
type Store struct {
	log      Log
	closeLog func() error // Options.CloseLog
	grace    time.Duration
	bounds   Options // the Max fields, defaults applied

	ctx    context.Context // cancelled by Close: ends waits for a run's writer
	cancel context.CancelFunc
	timers sync.WaitGroup // incomplete markers scheduled or being written

	mu      sync.Mutex // the runs lock: live runs, their heads and the subscribers
	live    map[string]*run
	byAgent map[string]int                    // live runs by agent
	subs    map[string]map[string]func(Event) // by run id, then subscription id
	orphans map[string]*time.Timer
}

// run is a run in progress on this daemon (started or started again by
// one of its connections).
type run struct {
	agent   string        // whose it is, as counted in byAgent
	head    Head          // as of the last record published, without intent or outcome
	writer  chan struct{} // held by the one append in progress, across its write
	pending bool          // its Start is in progress: head is not the log's yet
}

// OpenLog returns the store over log, which its opener closes after the
// Store. The runs this daemon left in progress are marked incomplete
// first: their connections are gone. It returns how many were.
func OpenLog(ctx context.Context, log Log, opts Options) (*Store, int, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	for _, b := range []struct {
		n   *int
		def int
	}{{&opts.MaxPerAgent, DefaultMaxPerAgent}, {&opts.MaxInProgress, DefaultMaxInProgress}, {&opts.MaxIntentBytes, DefaultMaxTextBytes}, {&opts.MaxOutcomeBytes, DefaultMaxTextBytes}} {
		if *b.n <= 0 {
			*b.n = b.def
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{log: log, closeLog: opts.CloseLog, grace: opts.Grace, bounds: opts, ctx: sctx, cancel: cancel, live: map[string]*run{}, byAgent: map[string]int{}, subs: map[string]map[string]func(Event){}, orphans: map[string]*time.Timer{}}
	stranded, err := log.Stranded(ctx)
	if err != nil {
		cancel()
		return nil, 0, fmt.Errorf("list the runs left in progress: %w", err)
	}
	n := 0
	for _, h := range stranded {
		_, err := s.end(ctx, nil, h.RunID, StatusIncomplete, nil, func(cur Head) bool {
			return cur.Node == h.Node && cur.Owner == h.Owner // not taken over since
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, errSkip), errors.Is(err, ErrEnded):
		default:
			cancel()
			return nil, n, fmt.Errorf("mark run %s incomplete: %w", h.RunID, err)
		}
	}
	return s, n, nil
}

// Close stops the incomplete markers not yet due (the next OpenLog writes
// them) and, when Options.CloseLog is set, closes the log.
func (s *Store) Close() error {
	s.mu.Lock()
	for id, t := range s.orphans {
		if t.Stop() {
			s.timers.Done()
		}
		delete(s.orphans, id)
	}
	s.mu.Unlock()
	s.cancel()
	s.timers.Wait()
	if s.closeLog != nil {
		return s.closeLog()
	}
	return nil
}

// Start is what runs.start asks for.
type Start struct {
	RunID              string // the idempotency key; "" mints a fresh id
	AgentID            string
	AgentName          string
	Intent             string
	OutcomeDescription string
	Owner              string // the connection starting it
}

// Start opens a run, or returns the run st.RunID names when it exists
// (idempotent start), making st.Owner its connection. existing says which.
// A run of another agent under that id is not found.
func (s *Store) Start(ctx context.Context, st Start) (runID string, existing bool, err error) {
	if err := CheckID("agent_id", st.AgentID); err != nil {
		return "", false, err
	}
	if st.RunID == "" {
		st.RunID = uuid.NewString()
	} else if err := CheckID("idempotency_key", st.RunID); err != nil {
		return "", false, err
	}
	for _, f := range []struct{ name, text string }{{"intent", st.Intent}, {"agent_name", st.AgentName}, {"outcome_description", st.OutcomeDescription}} {
		if len(f.text) > s.bounds.MaxIntentBytes {
			return "", false, &LimitError{Setting: "max_run_intent_bytes", Msg: fmt.Sprintf("%s is %d bytes; at most %d are accepted (max_run_intent_bytes): keep the text short, and put the rest in the run's turns", f.name, len(f.text), s.bounds.MaxIntentBytes)}
		}
	}
	now := time.Now().UTC()
	h := Head{RunID: st.RunID, AgentID: st.AgentID, Intent: st.Intent, Owner: st.Owner, Status: StatusInProgress, StartedAt: now}
	s.mu.Lock()
	r, ok := s.live[st.RunID]
	if ok && !r.pending && r.head.AgentID != st.AgentID {
		s.mu.Unlock()
		return "", false, ErrNotFound
	}
	if !ok {
		if err := s.admitLocked(st.AgentID); err != nil {
			s.mu.Unlock()
			return "", false, err
		}
		r = &run{agent: st.AgentID, head: h, writer: make(chan struct{}, 1), pending: true}
		s.addLiveLocked(st.RunID, r)
	}
	s.mu.Unlock()
	if err := s.takeSlot(ctx, r, st.RunID); err != nil {
		s.forget(st.RunID, r)
		return "", false, err
	}
	defer func() { <-r.writer }()

	body, err := json.Marshal(Record{Record: KindStarted, RunID: st.RunID, AgentID: st.AgentID, AgentName: st.AgentName, Intent: st.Intent, OutcomeDescription: st.OutcomeDescription, StartedAt: &now})
	if err != nil {
		s.forget(st.RunID, r)
		return "", false, err
	}
	cur, created, err := s.log.Start(ctx, h, LogRecord{Kind: KindStarted, Body: body})
	if err != nil {
		s.forget(st.RunID, r)
		if errors.Is(err, ErrNotFound) {
			return "", false, ErrNotFound
		}
		return "", false, fmt.Errorf("record the start of run %s: %w", st.RunID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur.Status != StatusInProgress {
		// An ended run started again: nothing more is recorded in it here.
		s.dropLiveLocked(st.RunID, r)
		return st.RunID, true, nil
	}
	cur.Intent, cur.Outcome = "", nil // read from the log when asked for
	r.head, r.pending = cur, false
	s.addLiveLocked(st.RunID, r)
	s.dropOrphanLocked(st.RunID)
	return st.RunID, !created, nil
}

// LimitError refuses what would pass one of the store's bounds; Setting
// names the daemon setting that sets it.
type LimitError struct{ Setting, Msg string }

func (e *LimitError) Error() string { return e.Msg }

// admitLocked refuses a new live run of agent past the bounds of runs in
// progress.
func (s *Store) admitLocked(agent string) error {
	if n := s.byAgent[agent]; n >= s.bounds.MaxPerAgent {
		return &LimitError{Setting: "max_runs_per_agent", Msg: fmt.Sprintf("agent '%s' has %d runs in progress on this daemon, the most max_runs_per_agent allows: complete one (runs.complete) before starting another", agent, n)}
	}
	if n := len(s.live); n >= s.bounds.MaxInProgress {
		return &LimitError{Setting: "max_runs_in_progress", Msg: fmt.Sprintf("this daemon has %d runs in progress, the most max_runs_in_progress allows: complete one (runs.complete) before starting another", n)}
	}
	return nil
}

// addLiveLocked makes r the live run of runID, counting it for its agent.
func (s *Store) addLiveLocked(runID string, r *run) {
	old, ok := s.live[runID]
	if ok && old == r {
		return
	}
	if ok {
		s.byAgent[old.agent]--
	}
	s.live[runID] = r
	s.byAgent[r.agent]++
}

// dropLiveLocked drops r from the live runs when it is runID's.
func (s *Store) dropLiveLocked(runID string, r *run) {
	if r == nil || s.live[runID] != r {
		return
	}
	delete(s.live, runID)
	if s.byAgent[r.agent]--; s.byAgent[r.agent] <= 0 {
		delete(s.byAgent, r.agent)
	}
}

// forget drops r from the live runs when it is a Start's placeholder that
// came to nothing.
func (s *Store) forget(runID string, r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.pending {
		s.dropLiveLocked(runID, r)
	}
}

// Info is a run's owning agent and the connection that started it. An
// unknown run is ErrNotFound.
func (s *Store) Info(ctx context.Context, runID string) (agentID, owner string, err error) {
	s.mu.Lock()
	if r, ok := s.live[runID]; ok && !r.pending {
		defer s.mu.Unlock()
		return r.head.AgentID, r.head.Owner, nil
	}
	s.mu.Unlock()
	h, err := s.log.Head(ctx, runID)
	if err != nil {
		return "", "", err
	}
	return h.AgentID, h.Owner, nil
}

// takeSlot waits for a live run's writer slot; release with <-r.writer.
func (s *Store) takeSlot(ctx context.Context, r *run, runID string) error {
	select {
	case r.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("run %s: waiting to append: %w", runID, context.Cause(ctx))
	case <-s.ctx.Done():
		return fmt.Errorf("run %s: the run store is closed", runID)
	}
}

// slot takes the writer slot of the run when it is live here; it returns
// nil when it is not (the log orders the appends of a run on several
// daemons). Release a non-nil run's with <-r.writer.
func (s *Store) slot(ctx context.Context, runID string) (*run, error) {
	s.mu.Lock()
	r := s.live[runID]
	s.mu.Unlock()
	if r == nil {
		return nil, nil
	}
	if err := s.takeSlot(ctx, r, runID); err != nil {
		return nil, err
	}
	return r, nil
}

// Append adds turns to a run in order and returns the index of the first.
// Each turn is bounded first; the batch is refused whole (a *DropError)
// when the run is unknown or ended, when it would pass MaxTurns, or when a
// turn cannot be bounded. It returns once the turns are durable.
func (s *Store) Append(ctx context.Context, runID string, turns []Turn) (base int, err error) {
	for i := range turns {
		if err := bound(&turns[i]); err != nil {
			return 0, &DropError{Reason: DropTurnTooLarge}
		}
	}
	r, err := s.slot(ctx, runID)
	if err != nil {
		return 0, err
	}
	if r != nil {
		defer func() { <-r.writer }()
	}
	recs := make([]Record, len(turns))
	h, err := s.log.Append(ctx, runID, func(h Head) (Batch, error) {
		if h.Turns+len(turns) > MaxTurns {
			return Batch{}, &DropError{Reason: DropRunTurnLimit}
		}
		base = h.Turns
		batch := Batch{Records: make([]LogRecord, len(turns))}
		for i := range turns {
			turns[i].Index = base + i
			recs[i] = Record{Record: KindTurn, Turn: &turns[i]}
			b, err := json.Marshal(recs[i])
			if err != nil {
				return Batch{}, fmt.Errorf("encode turn %d: %w", i, err)
			}
			batch.Records[i] = LogRecord{Kind: KindTurn, Body: b}
		}
		return batch, nil
	})
	var drop *DropError
	switch {
	case errors.As(err, &drop):
		return 0, err
	case errors.Is(err, ErrNotFound):
		return 0, &DropError{Reason: DropRunNotFound}
	case errors.Is(err, ErrEnded):
		s.retire(runID, r)
		return 0, &DropError{Reason: DropRunTerminal}
	case err != nil:
		return 0, fmt.Errorf("record turns of run %s: %w", runID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(h, recs)
	if r != nil && s.live[runID] == r {
		h.Intent, h.Outcome = "", nil
		r.head = h
	}
	return base, nil
}

// retire drops a live run that ended elsewhere (another daemon ended it).
func (s *Store) retire(runID string, r *run) {
	if r == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[runID] == r {
		s.dropLiveLocked(runID, r)
		s.dropOrphanLocked(runID)
	}
}

// publishLocked hands appended records to the run's subscribers; h is the
// run's head after them.
func (s *Store) publishLocked(h Head, recs []Record) {
	subs := s.subs[h.RunID]
	if len(subs) == 0 {
		return
	}
	cursor := h.Turns
	for _, rec := range recs {
		if rec.Record == KindTurn {
			cursor--
		}
	}
	for _, rec := range recs {
		if rec.Record == KindTurn {
			cursor++
		}
		ev := Event{RunID: h.RunID, AgentID: h.AgentID, Record: rec, Cursor: cursor, Status: h.Status}
		for _, push := range subs {
			push(ev)
		}
	}
}

// Complete ends a run with the outcome its agent reported. An unknown run
// is ErrNotFound; an ended one is an error saying so.
func (s *Store) Complete(ctx context.Context, runID string, outcome json.RawMessage) error {
	if len(outcome) > s.bounds.MaxOutcomeBytes {
		return &LimitError{Setting: "max_run_outcome_bytes", Msg: fmt.Sprintf("outcome is %d bytes; at most %d are accepted (max_run_outcome_bytes): report a summary, and put the rest in the run's turns", len(outcome), s.bounds.MaxOutcomeBytes)}
	}
	r, err := s.slot(ctx, runID)
	if err != nil {
		return err
	}
	if r != nil {
		defer func() { <-r.writer }()
	}
	_, err = s.end(ctx, r, runID, StatusCompleted, outcome, nil)
	return err
}

// errSkip is end's answer when its condition no longer holds.
var errSkip = errors.New("the run changed hands")

// end appends a run's terminal record, when cond (if any) holds of its head,
// and publishes it; the caller holds r's writer slot (r nil: the run is
// not live here).
func (s *Store) end(ctx context.Context, r *run, runID, status string, outcome json.RawMessage, cond func(Head) bool) (Head, error) {
	now := time.Now().UTC()
	rec := Record{Record: KindEnded, Status: status, Outcome: outcome, EndedAt: &now}
	h, err := s.log.Append(ctx, runID, func(h Head) (Batch, error) {
		if cond != nil && !cond(h) {
			return Batch{}, errSkip
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return Batch{}, fmt.Errorf("encode the end of run %s: %w", runID, err)
		}
		return Batch{Records: []LogRecord{{Kind: KindEnded, Body: b}}, End: &End{Status: status, At: now, Outcome: outcome}}, nil
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return h, ErrNotFound
	case errors.Is(err, ErrEnded):
		s.retire(runID, r)
		return h, fmt.Errorf("run %s: %w; a run is completed once", runID, err)
	case errors.Is(err, errSkip):
		return h, err
	case err != nil && h.RunID == "":
		return h, fmt.Errorf("record the end of run %s: %w", runID, err)
	}
	// The end is durable (err, if any, came after it).
	s.mu.Lock()
	s.publishLocked(h, []Record{rec})
	s.dropLiveLocked(runID, r)
	s.dropOrphanLocked(runID)
	s.mu.Unlock()
	return h, err
}

// Orphan marks the run incomplete after the grace period, unless it ends,
// or another connection takes it over (an idempotent start), first.
func (s *Store) Orphan(runID, conn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live[runID]
	if !ok || r.pending || r.head.Owner != conn || s.ctx.Err() != nil {
		return
	}
	s.dropOrphanLocked(runID)
	s.timers.Add(1)
	s.orphans[runID] = time.AfterFunc(s.grace, func() {
		defer s.timers.Done()
		s.markIncomplete(runID, conn)
	})
}

// dropOrphanLocked cancels a pending incomplete marker.
func (s *Store) dropOrphanLocked(runID string) {
	if t, ok := s.orphans[runID]; ok {
		if t.Stop() {
			s.timers.Done()
		}
		delete(s.orphans, runID)
	}
}

// markIncomplete writes the Incomplete marker of a run still orphaned: its
// owner on every daemon is still the connection that went away.
func (s *Store) markIncomplete(runID, conn string) {
	r, err := s.slot(s.ctx, runID)
	if err != nil || r == nil {
		return // the store closed (the next OpenLog marks it), or the run ended
	}
	defer func() { <-r.writer }()
	s.mu.Lock()
	delete(s.orphans, runID)
	still := s.live[runID] == r && r.head.Owner == conn
	s.mu.Unlock()
	if !still {
		return
	}
	_, err = s.end(s.ctx, r, runID, StatusIncomplete, nil, func(h Head) bool { return h.Owner == conn })
	if errors.Is(err, errSkip) {
		s.retire(runID, r) // another daemon's connection took it over
	}
}

// Subscribe returns the run's turns so far and registers push for every
// record appended after them, atomically: nothing is missed or repeated.
// push must not block. A second Subscribe with the same id replaces the
// first. A run in progress on another daemon is an *ElsewhereError.
func (s *Store) Subscribe(ctx context.Context, runID, id string, push func(Event)) (Snapshot, error) {
	s.mu.Lock()
	r, live := s.live[runID]
	var h Head
	if live {
		h = r.head
		s.addSubLocked(runID, id, push)
	}
	s.mu.Unlock()
	if !live {
		var err error
		if h, err = s.log.Head(ctx, runID); err != nil {
			return Snapshot{}, err
		}
		if h.Status == StatusInProgress {
			return Snapshot{}, &ElsewhereError{RunID: runID, Node: h.Node}
		}
		// Ended: nothing more is appended, so the log holds the whole run.
		s.mu.Lock()
		s.addSubLocked(runID, id, push)
		s.mu.Unlock()
	}
	snap := Snapshot{RunID: runID, AgentID: h.AgentID, Cursor: h.Turns, Status: h.Status, TurnsSoFar: []Record{}}
	to := -1
	if live {
		to = h.Records // the records published: the ones after reach push
	}
	recs, err := s.records(ctx, runID, 0, to)
	if err != nil {
		s.Unsubscribe(runID, id)
		return Snapshot{}, err
	}
	snap.TurnsSoFar = turnsOf(recs)
	return snap, nil
}

func (s *Store) addSubLocked(runID, id string, push func(Event)) {
	m := s.subs[runID]
	if m == nil {
		m = map[string]func(Event){}
		s.subs[runID] = m
	}
	m[id] = push
}

// Unsubscribe drops a subscription; it reports whether there was one.
func (s *Store) Unsubscribe(runID, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.subs[runID]
	_, had := m[id]
	delete(m, id)
	if len(m) == 0 {
		delete(s.subs, runID)
	}
	return had
}

// records reads and decodes a run's records in [from, to).
func (s *Store) records(ctx context.Context, runID string, from, to int) ([]Record, error) {
	if to >= 0 && from >= to {
		return []Record{}, nil
	}
	raws, err := s.log.Records(ctx, runID, from, to)
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, len(raws))
	for _, raw := range raws {
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, fmt.Errorf("run %s holds a record that is not valid: %w", runID, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// turnsOf keeps the turn records.
func turnsOf(recs []Record) []Record {
	out := []Record{}
	for _, r := range recs {
		if r.Record == KindTurn {
			out = append(out, r)
		}
	}
	return out
}

// List is the agent's runs, newest first.
func (s *Store) List(ctx context.Context, agentID string) ([]Summary, error) {
	heads, err := s.log.List(ctx, agentID)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(heads))
	for _, h := range heads {
		out = append(out, Summary{RunID: h.RunID, AgentID: h.AgentID, Intent: h.Intent, StartedAt: h.StartedAt, EndedAt: h.EndedAt, Status: h.Status, TurnCount: h.Turns})
	}
	return out, nil
}

// Trace is a run's records from position cursor on, every durable one
// (appended on any daemon). An unknown run is ErrNotFound.
func (s *Store) Trace(ctx context.Context, runID string, cursor int) ([]Record, error) {
	recs, err := s.records(ctx, runID, cursor, -1)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	return recs, nil
}
