package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parslee-ai/car-server/internal/journal"
)

// Options configure a Store. Zero values take the defaults noted.
type Options struct {
	// Grace is how long a run whose connection went away without
	// runs.complete waits before it is marked incomplete (10 s).
	Grace time.Duration
}

// ErrNotFound is the answer for a run that does not exist.
var ErrNotFound = errors.New("run not found")

// DropError is a record_turns batch refused whole; Reason is one of the
// Drop constants.
type DropError struct{ Reason string }

func (e *DropError) Error() string { return "turns dropped: " + e.Reason }

// Store is the daemon's run traces. It is safe for concurrent use.
type Store struct {
	root  string
	grace time.Duration

	ctx    context.Context // cancelled by Close: ends waits for a run's writer
	cancel context.CancelFunc
	timers sync.WaitGroup // incomplete markers scheduled or being written

	mu      sync.Mutex // the runs lock: runs, their summaries, records and subscribers
	runs    map[string]*run
	orphans map[string]*time.Timer
}

// run is one run the store knows.
type run struct {
	sum     Summary
	path    string
	owner   string           // the connection that started it, or last re-started it
	j       *journal.Journal // open while the run is in progress
	writer  chan struct{}    // held by the one append in progress, across its fsync
	records int              // records published: the key of the next
	subs    map[string]func(Event)
}

// LoadReport says what Open found on disk.
type LoadReport struct {
	Runs       int // runs loaded
	Incomplete int // runs found without an end, now marked incomplete
	Torn       int // runs whose file ended in a torn line (crash residue), cut off
}

// Open loads every run under root (creating it, 0700). A run the last
// daemon left in progress is marked incomplete: its connection is gone.
func Open(root string, opts Options) (*Store, LoadReport, error) {
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{root: root, grace: opts.Grace, ctx: ctx, cancel: cancel, runs: map[string]*run{}, orphans: map[string]*time.Timer{}}
	var rep LoadReport
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
	}
	agents, err := os.ReadDir(root)
	if err != nil {
		return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
	}
	for _, a := range agents {
		if !a.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, a.Name()))
		if err != nil {
			return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
		}
		for _, f := range files {
			if f.IsDir() || !strings.HasSuffix(f.Name(), ".jsonl") {
				continue
			}
			if err := s.load(filepath.Join(root, a.Name(), f.Name()), &rep); err != nil {
				return nil, rep, err
			}
		}
	}
	return s, rep, nil
}

// load reads one run file into the index, ending it when it never ended.
func (s *Store) load(path string, rep *LoadReport) error {
	var r *run
	var bad error
	jr, err := journal.Read(path, func(_ string, raw []byte) {
		// Only what the index needs: a turn's prompt, parameters and
		// output are skipped, not built, so start-up does not decode them.
		var l struct {
			Record    string     `json:"record"`
			RunID     string     `json:"run_id"`
			AgentID   string     `json:"agent_id"`
			Intent    string     `json:"intent"`
			StartedAt *time.Time `json:"started_at"`
			Status    string     `json:"status"`
			EndedAt   *time.Time `json:"ended_at"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			bad = fmt.Errorf("run file %s: %v", path, err)
			return
		}
		switch l.Record {
		case KindStarted:
			if l.StartedAt == nil {
				bad = fmt.Errorf("run file %s: the started record has no started_at", path)
				return
			}
			r = &run{path: path, writer: make(chan struct{}, 1), subs: map[string]func(Event){}, sum: Summary{
				RunID: l.RunID, AgentID: l.AgentID, Intent: l.Intent, StartedAt: *l.StartedAt, Status: StatusInProgress,
			}}
		case KindTurn:
			if r != nil {
				r.sum.TurnCount++
			}
		case KindEnded:
			if r != nil {
				r.sum.Status, r.sum.EndedAt = l.Status, l.EndedAt
			}
		}
		if r != nil {
			r.records++
		}
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("%w; move the file aside to start without this run", err)
	}
	if r == nil {
		// Created, but its first record never reached the disk: never acknowledged.
		return os.Remove(path)
	}
	if jr.TruncatedBytes > 0 {
		rep.Torn++
	}
	rep.Runs++
	s.runs[r.sum.RunID] = r
	if r.sum.Status != StatusInProgress {
		return nil
	}
	// The journal cuts the torn tail off as it opens.
	j, _, err := journal.Open(path)
	if err != nil {
		return err
	}
	r.j = j
	rep.Incomplete++
	return s.end(r, StatusIncomplete, nil)
}

// Close stops the incomplete markers not yet due (the next Open writes
// them) and closes the runs in progress.
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
	s.mu.Lock()
	var open []*journal.Journal
	for _, r := range s.runs {
		if r.j != nil {
			open = append(open, r.j)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, j := range open {
		errs = append(errs, j.Close())
	}
	return errors.Join(errs...)
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
	s.mu.Lock()
	if r, ok := s.runs[st.RunID]; ok {
		defer s.mu.Unlock()
		if r.sum.AgentID != st.AgentID {
			return "", false, ErrNotFound
		}
		r.owner = st.Owner
		s.dropOrphanLocked(st.RunID)
		return st.RunID, true, nil
	}
	now := time.Now().UTC()
	r := &run{
		path:   filepath.Join(s.root, encodeID(st.AgentID), encodeID(st.RunID)+".jsonl"),
		owner:  st.Owner,
		writer: make(chan struct{}, 1),
		subs:   map[string]func(Event){},
		sum:    Summary{RunID: st.RunID, AgentID: st.AgentID, Intent: st.Intent, StartedAt: now, Status: StatusInProgress},
	}
	r.writer <- struct{}{} // nothing appends before the started record is down
	s.runs[st.RunID] = r
	s.mu.Unlock()
	defer func() { <-r.writer }()

	rec := Record{Record: KindStarted, RunID: st.RunID, AgentID: st.AgentID, AgentName: st.AgentName, Intent: st.Intent, OutcomeDescription: st.OutcomeDescription, StartedAt: &now}
	if err := s.create(r, rec); err != nil {
		s.mu.Lock()
		delete(s.runs, st.RunID)
		s.mu.Unlock()
		return "", false, err
	}
	return st.RunID, false, nil
}

// create opens a new run's file and writes its started record.
func (s *Store) create(r *run, rec Record) error {
	j, _, err := journal.Open(r.path)
	if err != nil {
		return err
	}
	b, err := encodeLine(0, rec)
	if err == nil {
		err = j.AppendBatch([][]byte{b})
	}
	if err != nil {
		_ = j.Close()
		return fmt.Errorf("record the start of run %s: %w", r.sum.RunID, err)
	}
	s.mu.Lock()
	r.j = j
	r.records = 1
	s.mu.Unlock()
	return nil
}

// encodeLine is the journal line of the record at position seq.
func encodeLine(seq int, rec Record) ([]byte, error) {
	return json.Marshal(line{Key: fmt.Sprintf("%08d", seq), Op: rec.Record, Record: rec})
}

// Info is a run's owning agent and the connection that started it.
func (s *Store) Info(runID string) (agentID, owner string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	if !ok {
		return "", "", false
	}
	return r.sum.AgentID, r.owner, true
}

// take waits for the run's writer slot; release with <-r.writer.
func (s *Store) take(ctx context.Context, runID string) (*run, error) {
	s.mu.Lock()
	r, ok := s.runs[runID]
	s.mu.Unlock()
	if !ok {
		return nil, &DropError{Reason: DropRunNotFound}
	}
	select {
	case r.writer <- struct{}{}:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("run %s: waiting to append: %w", runID, context.Cause(ctx))
	case <-s.ctx.Done():
		return nil, fmt.Errorf("run %s: the run store is closed", runID)
	}
}

// Append adds turns to a run in order and returns the index of the first.
// Each turn is bounded first; the batch is refused whole (a *DropError)
// when the run is unknown or ended, when it would pass MaxTurns, or when a
// turn cannot be bounded. It returns once the turns are on disk.
func (s *Store) Append(ctx context.Context, runID string, turns []Turn) (base int, err error) {
	for i := range turns {
		if err := bound(&turns[i]); err != nil {
			return 0, &DropError{Reason: DropTurnTooLarge}
		}
	}
	r, err := s.take(ctx, runID)
	if err != nil {
		return 0, err
	}
	defer func() { <-r.writer }()
	s.mu.Lock()
	status, base, seq, j := r.sum.Status, r.sum.TurnCount, r.records, r.j
	s.mu.Unlock()
	switch {
	case status != StatusInProgress || j == nil:
		return 0, &DropError{Reason: DropRunTerminal}
	case base+len(turns) > MaxTurns:
		return 0, &DropError{Reason: DropRunTurnLimit}
	}
	recs := make([]Record, len(turns))
	lines := make([][]byte, len(turns))
	for i := range turns {
		turns[i].Index = base + i
		recs[i] = Record{Record: KindTurn, Turn: &turns[i]}
		if lines[i], err = encodeLine(seq+i, recs[i]); err != nil {
			return 0, fmt.Errorf("encode turn %d: %w", i, err)
		}
	}
	if err := j.AppendBatch(lines); err != nil {
		return 0, fmt.Errorf("record turns of run %s: %w", runID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		r.sum.TurnCount++
		r.records++
		s.publishLocked(r, rec)
	}
	return base, nil
}

// publishLocked hands one appended record to the run's subscribers.
func (s *Store) publishLocked(r *run, rec Record) {
	ev := Event{RunID: r.sum.RunID, AgentID: r.sum.AgentID, Record: rec, Cursor: r.sum.TurnCount, Status: r.sum.Status}
	for _, push := range r.subs {
		push(ev)
	}
}

// Complete ends a run with the outcome its agent reported. An unknown run
// is ErrNotFound; an ended one is an error saying so.
func (s *Store) Complete(ctx context.Context, runID string, outcome json.RawMessage) error {
	r, err := s.take(ctx, runID)
	if err != nil {
		var drop *DropError
		if errors.As(err, &drop) {
			return ErrNotFound
		}
		return err
	}
	defer func() { <-r.writer }()
	return s.end(r, StatusCompleted, outcome)
}

// end writes a run's terminal record and closes its file; the caller holds
// the run's writer slot (or is loading it).
func (s *Store) end(r *run, status string, outcome json.RawMessage) error {
	s.mu.Lock()
	cur, seq, j := r.sum.Status, r.records, r.j
	s.mu.Unlock()
	if cur != StatusInProgress || j == nil {
		return fmt.Errorf("run %s already ended (%s); a run is completed once", r.sum.RunID, cur)
	}
	now := time.Now().UTC()
	rec := Record{Record: KindEnded, Status: status, Outcome: outcome, EndedAt: &now}
	b, err := encodeLine(seq, rec)
	if err == nil {
		err = j.AppendBatch([][]byte{b})
	}
	if err != nil {
		return fmt.Errorf("record the end of run %s: %w", r.sum.RunID, err)
	}
	s.mu.Lock()
	r.sum.Status, r.sum.EndedAt = status, &now
	r.records++
	r.j = nil
	s.publishLocked(r, rec)
	s.dropOrphanLocked(r.sum.RunID)
	s.mu.Unlock()
	return j.Close()
}

// Orphan marks the run incomplete after the grace period, unless it ends,
// or another connection takes it over (an idempotent start), first.
func (s *Store) Orphan(runID, conn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	if !ok || r.owner != conn || r.sum.Status != StatusInProgress || s.ctx.Err() != nil {
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

// markIncomplete writes the Incomplete marker of a run still orphaned.
func (s *Store) markIncomplete(runID, conn string) {
	r, err := s.take(s.ctx, runID)
	if err != nil {
		return // the store closed: the next Open marks it
	}
	defer func() { <-r.writer }()
	s.mu.Lock()
	delete(s.orphans, runID)
	still := r.owner == conn && r.sum.Status == StatusInProgress
	s.mu.Unlock()
	if still {
		_ = s.end(r, StatusIncomplete, nil)
	}
}

// Subscribe returns the run's turns so far and registers push for every
// record appended after them, atomically: nothing is missed or repeated.
// push must not block. A second Subscribe with the same id replaces the
// first.
func (s *Store) Subscribe(runID, id string, push func(Event)) (Snapshot, error) {
	s.mu.Lock()
	r, ok := s.runs[runID]
	if !ok {
		s.mu.Unlock()
		return Snapshot{}, ErrNotFound
	}
	r.subs[id] = push
	snap := Snapshot{RunID: runID, AgentID: r.sum.AgentID, Cursor: r.sum.TurnCount, Status: r.sum.Status, TurnsSoFar: []Record{}}
	if r.sum.Status == StatusInProgress {
		recs, err := liveRecords(r)
		s.mu.Unlock()
		if err != nil {
			return Snapshot{}, err
		}
		snap.TurnsSoFar = turnsOf(recs)
		return snap, nil
	}
	path := r.path
	s.mu.Unlock()
	// Ended: nothing more is appended, so the file is the whole run.
	recs, err := readRecords(path)
	if err != nil {
		return Snapshot{}, err
	}
	snap.TurnsSoFar = turnsOf(recs)
	return snap, nil
}

// Unsubscribe drops a subscription; it reports whether there was one.
func (s *Store) Unsubscribe(runID, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	if !ok {
		return false
	}
	_, had := r.subs[id]
	delete(r.subs, id)
	return had
}

// liveRecords are the published records of a run in progress, from its
// journal's memory (no I/O). s.mu is held.
func liveRecords(r *run) ([]Record, error) {
	var recs []Record
	var bad error
	if r.j == nil {
		return nil, nil // its started record is being written
	}
	r.j.Each(func(_ string, raw []byte) {
		if len(recs) == r.records || bad != nil {
			return // flushed, not yet published
		}
		var l line
		if bad = json.Unmarshal(raw, &l); bad == nil {
			recs = append(recs, l.Record)
		}
	})
	return recs, bad
}

// readRecords reads an ended run's file.
func readRecords(path string) ([]Record, error) {
	var recs []Record
	var bad error
	_, err := journal.Read(path, func(_ string, raw []byte) {
		var l line
		if err := json.Unmarshal(raw, &l); err != nil && bad == nil {
			bad = err
		}
		recs = append(recs, l.Record)
	})
	if err == nil {
		err = bad
	}
	return recs, err
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
func (s *Store) List(agentID string) []Summary {
	s.mu.Lock()
	out := []Summary{}
	for _, r := range s.runs {
		if r.sum.AgentID == agentID {
			out = append(out, r.sum)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out
}

// Trace is a run's records from position cursor on. An unknown run is
// ErrNotFound.
func (s *Store) Trace(runID string, cursor int) ([]Record, error) {
	s.mu.Lock()
	r, ok := s.runs[runID]
	if !ok {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	var recs []Record
	var err error
	if r.sum.Status == StatusInProgress {
		recs, err = liveRecords(r)
		s.mu.Unlock()
	} else {
		path := r.path
		s.mu.Unlock()
		recs, err = readRecords(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	if cursor >= len(recs) {
		return []Record{}, nil
	}
	return recs[cursor:], nil
}
