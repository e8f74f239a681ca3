package file

import (
	"bytes"
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

	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
)

// Runs is the run log (runs.Log) of a single daemon: one journal per run
// under <root>/<agent_id>/<run_id>.jsonl, one record a line, through the
// journal's durability rules (fsync before the ack, a torn tail cut off,
// interior corruption refused). It keeps every run's head in
// memory and an in-progress run's records in its journal's memory, so only
// an ended run's trace is read from disk. It is safe for concurrent use.
type Runs struct {
	root string

	mu       sync.Mutex // guards runs and the fields of each fileRun; never held across I/O
	runs     map[string]*fileRun
	stranded []string // the runs found in progress at open
}

var _ runs.Log = (*Runs)(nil)

// fileRun is one run of the log.
type fileRun struct {
	head runs.Head
	path string
	j    *journal.Journal // open while the run is in progress
	lock chan struct{}    // held by the create and by each append, across the fsync
	gone bool             // its create failed: it is not a run
}

// RunsReport says what OpenRuns (or OpenRunStore) found on disk.
type RunsReport struct {
	Runs       int // runs loaded
	Incomplete int // runs found without an end, now marked incomplete (by OpenRunStore only)
	Torn       int // runs whose file ended in a torn line (crash residue), cut off
}

// OpenRunStore opens the run log under root and the run traces over it
// (runs.OpenLog), which close together: the Store's Close closes the log.
// A run the last daemon left in progress is marked incomplete: its
// connection is gone.
func OpenRunStore(root string, opts runs.Options) (*runs.Store, RunsReport, error) {
	log, rep, err := OpenRuns(root)
	if err != nil {
		return nil, rep, err
	}
	opts.CloseLog = log.Close
	s, n, err := runs.OpenLog(context.Background(), log, opts)
	rep.Incomplete = n
	if err != nil {
		return nil, rep, errors.Join(err, log.Close())
	}
	return s, rep, nil
}

// OpenRuns loads every run under root (creating it, 0700). A run left
// in progress keeps its journal open (its torn tail cut off) and is
// listed by Stranded.
func OpenRuns(root string) (*Runs, RunsReport, error) {
	l := &Runs{root: root, runs: map[string]*fileRun{}}
	var rep RunsReport
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
			return nil, rep, errors.Join(fmt.Errorf("runs directory %s: %w", root, err), l.Close())
		}
		for _, f := range files {
			if f.IsDir() || !strings.HasSuffix(f.Name(), ".jsonl") {
				continue
			}
			if err := l.load(filepath.Join(root, a.Name(), f.Name()), &rep); err != nil {
				return nil, rep, errors.Join(err, l.Close())
			}
		}
	}
	sort.Strings(l.stranded)
	return l, rep, nil
}

// load reads one run file into the index.
func (l *Runs) load(path string, rep *RunsReport) error {
	var r *fileRun
	var bad error
	jr, err := journal.Read(path, func(_ string, raw []byte) {
		// Only what the index needs: a turn's prompt, parameters and
		// output are skipped, not built, so start-up does not decode them.
		var rec struct {
			Record    string     `json:"record"`
			RunID     string     `json:"run_id"`
			AgentID   string     `json:"agent_id"`
			Intent    string     `json:"intent"`
			StartedAt *time.Time `json:"started_at"`
			Status    string     `json:"status"`
			EndedAt   *time.Time `json:"ended_at"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			bad = fmt.Errorf("run file %s: %v", path, err)
			return
		}
		switch rec.Record {
		case runs.KindStarted:
			if rec.StartedAt == nil {
				bad = fmt.Errorf("run file %s: the started record has no started_at", path)
				return
			}
			r = &fileRun{path: path, lock: make(chan struct{}, 1), head: runs.Head{
				RunID: rec.RunID, AgentID: rec.AgentID, Intent: rec.Intent, StartedAt: *rec.StartedAt, Status: runs.StatusInProgress,
			}}
		case runs.KindTurn:
			if r != nil {
				r.head.Turns++
			}
		case runs.KindEnded:
			if r != nil {
				r.head.Status, r.head.EndedAt = rec.Status, rec.EndedAt
			}
		}
		if r != nil {
			r.head.Records++
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
	l.runs[r.head.RunID] = r
	if r.head.Status != runs.StatusInProgress {
		return nil
	}
	// The journal cuts the torn tail off as it opens.
	j, _, err := journal.Open(path)
	if err != nil {
		return err
	}
	r.j = j
	l.stranded = append(l.stranded, r.head.RunID)
	return nil
}

// Close closes the journals of the runs in progress.
func (l *Runs) Close() error {
	l.mu.Lock()
	var open []*journal.Journal
	for _, r := range l.runs {
		if r.j != nil {
			open = append(open, r.j)
			r.j = nil
		}
	}
	l.mu.Unlock()
	var errs []error
	for _, j := range open {
		errs = append(errs, j.Close())
	}
	return errors.Join(errs...)
}

// acquire takes the lock of a run, waiting for the append or create that
// holds it; release with <-r.lock.
func (l *Runs) acquire(ctx context.Context, runID string) (*fileRun, error) {
	l.mu.Lock()
	r, ok := l.runs[runID]
	l.mu.Unlock()
	if !ok {
		return nil, runs.ErrNotFound
	}
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("run %s: waiting to append: %w", runID, context.Cause(ctx))
	}
	l.mu.Lock()
	gone := r.gone
	l.mu.Unlock()
	if gone {
		<-r.lock
		return nil, runs.ErrNotFound
	}
	return r, nil
}

// Start creates the run's file and writes its started record, or takes an
// existing run of the same agent over.
func (l *Runs) Start(ctx context.Context, h runs.Head, started runs.LogRecord) (runs.Head, bool, error) {
	l.mu.Lock()
	if _, ok := l.runs[h.RunID]; ok {
		l.mu.Unlock()
		r, err := l.acquire(ctx, h.RunID)
		if errors.Is(err, runs.ErrNotFound) {
			return l.Start(ctx, h, started) // its create failed: create it
		}
		if err != nil {
			return runs.Head{}, false, err
		}
		defer func() { <-r.lock }()
		l.mu.Lock()
		defer l.mu.Unlock()
		if r.head.AgentID != h.AgentID {
			return runs.Head{}, false, runs.ErrNotFound
		}
		r.head.Owner, r.head.Node = h.Owner, h.Node
		return r.head, false, nil
	}
	h.Status, h.Turns, h.Records, h.EndedAt, h.Outcome = runs.StatusInProgress, 0, 0, nil, nil
	r := &fileRun{head: h, path: filepath.Join(l.root, encodeID(h.AgentID), encodeID(h.RunID)+".jsonl"), lock: make(chan struct{}, 1)}
	r.lock <- struct{}{} // nothing appends before the started record is down
	l.runs[h.RunID] = r
	l.mu.Unlock()
	defer func() { <-r.lock }()

	j, _, err := journal.Open(r.path)
	if err == nil {
		err = j.AppendBatch([][]byte{encodeLine(0, started)})
		if err != nil {
			_ = j.Close()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		r.gone = true
		delete(l.runs, h.RunID)
		return runs.Head{}, false, err
	}
	r.j = j
	r.head.Records = 1
	return r.head, true, nil
}

// encodeLine is the journal line of a record at position seq: the record's
// object with its key (the position, zero-padded so key order is trace
// order) and op (its kind) first.
func encodeLine(seq int, rec runs.LogRecord) []byte {
	key, _ := json.Marshal(fmt.Sprintf("%08d", seq))
	op, _ := json.Marshal(rec.Kind)
	var b bytes.Buffer
	b.WriteString(`{"key":`)
	b.Write(key)
	b.WriteString(`,"op":`)
	b.Write(op)
	rest := bytes.TrimSpace(rec.Body)
	rest = bytes.TrimSpace(rest[min(1, len(rest)):]) // past the object's '{'
	if len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	if len(rest) == 0 {
		rest = []byte("}")
	}
	b.Write(rest)
	return b.Bytes()
}

// Append writes a batch to a run's journal, durably, in one write.
func (l *Runs) Append(ctx context.Context, runID string, next func(runs.Head) (runs.Batch, error)) (runs.Head, error) {
	r, err := l.acquire(ctx, runID)
	if err != nil {
		return runs.Head{}, err
	}
	defer func() { <-r.lock }()
	l.mu.Lock()
	h, j := r.head, r.j
	l.mu.Unlock()
	if h.Status != runs.StatusInProgress || j == nil {
		return runs.Head{}, fmt.Errorf("%w (%s)", runs.ErrEnded, h.Status)
	}
	batch, err := next(h)
	if err != nil {
		return runs.Head{}, err
	}
	lines := make([][]byte, len(batch.Records))
	turns := 0
	for i, rec := range batch.Records {
		if err := store.CheckRunRecord(i, rec.Body); err != nil {
			return runs.Head{}, err
		}
		lines[i] = encodeLine(h.Records+i, rec)
		if rec.Kind == runs.KindTurn {
			turns++
		}
	}
	if err := j.AppendBatch(lines); err != nil {
		return runs.Head{}, err
	}
	l.mu.Lock()
	r.head.Turns += turns
	r.head.Records += len(lines)
	if batch.End != nil {
		at := batch.End.At
		r.head.Status, r.head.EndedAt, r.head.Outcome = batch.End.Status, &at, batch.End.Outcome
		r.j = nil
	}
	h = r.head
	l.mu.Unlock()
	if batch.End != nil {
		// The end is on disk; a failure to close the file does not undo it.
		if err := j.Close(); err != nil {
			return h, fmt.Errorf("run %s ended, but closing its file failed: %w", runID, err)
		}
	}
	return h, nil
}

// Head returns a run's head.
func (l *Runs) Head(_ context.Context, runID string) (runs.Head, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[runID]
	if !ok || r.gone {
		return runs.Head{}, runs.ErrNotFound
	}
	return r.head, nil
}

// Records returns a run's records in [from, to): from its journal's memory
// while it is in progress, from its file once it ended.
func (l *Runs) Records(_ context.Context, runID string, from, to int) ([]json.RawMessage, error) {
	l.mu.Lock()
	r, ok := l.runs[runID]
	if !ok || r.gone {
		l.mu.Unlock()
		return nil, runs.ErrNotFound
	}
	j, path, n := r.j, r.path, r.head.Records
	l.mu.Unlock()
	if to < 0 || to > n {
		to = n
	}
	if from >= to {
		return []json.RawMessage{}, nil
	}
	var recs []json.RawMessage
	if j != nil {
		j.Each(func(_ string, raw []byte) {
			if len(recs) < to {
				recs = append(recs, raw)
			}
		})
	} else {
		if _, err := journal.Read(path, func(_ string, raw []byte) {
			if len(recs) < to {
				recs = append(recs, raw) // Read hands each record over
			}
		}); err != nil {
			return nil, err
		}
	}
	if from >= len(recs) {
		return []json.RawMessage{}, nil
	}
	return recs[from:], nil
}

// List returns an agent's runs, newest first.
func (l *Runs) List(_ context.Context, agentID string) ([]runs.Head, error) {
	l.mu.Lock()
	out := []runs.Head{}
	for _, r := range l.runs {
		if r.head.AgentID == agentID && !r.gone {
			out = append(out, r.head)
		}
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// Stranded lists the runs found in progress at open that still are.
func (l *Runs) Stranded(context.Context) ([]runs.Head, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runs.Head
	for _, id := range l.stranded {
		if r := l.runs[id]; r != nil && r.head.Status == runs.StatusInProgress {
			out = append(out, r.head)
		}
	}
	return out, nil
}

// encodeID is the file-name form of an id: a-z, 0-9, '-' and '_' pass
// through and every other byte (a path separator, '.', an uppercase letter)
// becomes '%' and two lowercase hex digits, so an id can never name a path
// outside its directory, and two ids never share a file on a case-folding
// file system.
func encodeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02x", c)
	}
	return b.String()
}
