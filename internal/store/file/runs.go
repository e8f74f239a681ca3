package file

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/runs"
	"github.com/parslee-ai/car-server/internal/store"
)

// Runs is the run log (runs.Log) of a single daemon: one journal per run
// under <root>/<agent_id>/<run_id>.jsonl, one record a line, through the
// journal's durability rules (fsync before the ack, a torn tail cut off,
// interior corruption refused). Beside a run's records its file holds
// owner lines (op "owner": the connection and daemon that last started
// it while it was in progress), which are not records.
//
// What it keeps in memory is bounded. At open it lists the files and reads
// only the last line of each (to find the runs left in progress); a run's
// head is read from its file the first time the run is used, and kept
// without its intent and outcome, which are read from the file when a head
// is asked for. At most maxOpen journals are open at once: opening another
// closes the least recently used idle one (it is opened again when its run
// is next appended to), and waits while all of them are busy. Records are
// read from the file. It is safe for concurrent use.
type Runs struct {
	root    string
	node    string
	maxOpen int

	mu       sync.Mutex // guards what follows and the fields of each fileRun; never held across I/O
	runs     map[string]*fileRun
	open     *list.List    // the runs whose journal is open, most recently used first
	nopen    int           // journals open or being opened
	waiters  int           // openJournal calls waiting for a journal to become idle
	wake     chan struct{} // closed (and replaced) when a run's lock is released while there are waiters
	loaded   int           // heads read from their files or created
	stranded []string      // the runs found in progress at open
	closed   bool          // Close was called: no journal opens again
}

// errRunsClosed refuses a write to the run log after its Close.
var errRunsClosed = errors.New("the run log is closed (the daemon is shutting down); nothing was written")

var _ runs.Log = (*Runs)(nil)

// fileRun is one run of the log.
type fileRun struct {
	runID, agentID, path string

	lock   chan struct{} // held by the create, each append, and each read of the head from the file
	gone   bool          // its create failed: it is not a run
	loaded bool          // head holds what the file says
	// head is the run's head once loaded, without its outcome, and
	// without its intent unless intent is set.
	head   runs.Head
	intent bool             // head.Intent is kept: while the journal is open
	j      *journal.Journal // open while the run is in progress and used lately
	elem   *list.Element    // in Runs.open while j is open
}

// DefaultMaxOpenRunJournals is the run journals open at once when
// MaxOpenRunJournals is not given, and the daemon's max_open_run_journals
// default.
const DefaultMaxOpenRunJournals = 256

// RunsOption configures OpenRuns.
type RunsOption func(*Runs)

// RunsNode is the daemon the log stamps on every run it starts or takes
// over, and on the runs it reads from disk: a state root has one daemon.
func RunsNode(node string) RunsOption { return func(l *Runs) { l.node = node } }

// MaxOpenRunJournals bounds the run journals open at once (each an open
// file); n <= 0 takes DefaultMaxOpenRunJournals.
func MaxOpenRunJournals(n int) RunsOption {
	return func(l *Runs) {
		if n > 0 {
			l.maxOpen = n
		}
	}
}

// RunsReport says what OpenRuns (or OpenRunStore) found on disk.
type RunsReport struct {
	Runs       int // runs found
	Incomplete int // runs found without an end, now marked incomplete (by OpenRunStore only)
	Torn       int // runs whose file ended in a torn line (crash residue), cut off
}

// OpenRunStore opens the run log under root and the run traces over it
// (runs.OpenLog), which close together: the Store's Close closes the log.
// A run the last daemon left in progress is marked incomplete: its
// connection is gone.
func OpenRunStore(root string, opts runs.Options, ropts ...RunsOption) (*runs.Store, RunsReport, error) {
	log, rep, err := OpenRuns(root, ropts...)
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

// OpenRuns indexes every run under root (creating it, 0700) from the file
// names, reading the last line of each file; a run left in progress has
// its head read now (its torn tail is cut off when it is next appended to)
// and is listed by Stranded.
func OpenRuns(root string, opts ...RunsOption) (*Runs, RunsReport, error) {
	l := &Runs{root: root, maxOpen: DefaultMaxOpenRunJournals, runs: map[string]*fileRun{}, open: list.New(), wake: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	var rep RunsReport
	if err := atomicfile.MkdirAll(root); err != nil {
		return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
	}
	agents, err := os.ReadDir(root)
	if err != nil {
		return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
	}
	for _, a := range agents {
		agentID, ok := decodeID(a.Name())
		if !a.IsDir() || !ok {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, a.Name()))
		if err != nil {
			return nil, rep, fmt.Errorf("runs directory %s: %w", root, err)
		}
		for _, f := range files {
			name, isRun := strings.CutSuffix(f.Name(), ".jsonl")
			runID, ok := decodeID(name)
			if f.IsDir() || !isRun || !ok {
				continue
			}
			if err := l.index(agentID, runID, filepath.Join(root, a.Name(), f.Name()), &rep); err != nil {
				return nil, rep, fmt.Errorf("%w; move the file aside to start without this run", err)
			}
		}
	}
	sort.Strings(l.stranded)
	return l, rep, nil
}

// index adds one run file to the index, reading its head when the run is
// still in progress.
func (l *Runs) index(agentID, runID, path string, rep *RunsReport) error {
	last, err := lastLine(path)
	if err != nil {
		return err
	}
	if last == nil {
		// Created, but its first record never reached the disk: never acknowledged.
		return os.Remove(path)
	}
	var tail struct {
		Op string `json:"op"`
	}
	if err := json.Unmarshal(last, &tail); err != nil {
		// A torn tail (a power loss can leave a whole line of zero bytes),
		// or corruption: the journal's rules tell them apart as the run is
		// loaded. A file holding no record before its torn tail was never
		// acknowledged, as an empty one.
		rep, err := journal.Verify(path)
		if err != nil {
			return err
		}
		if rep.Lines == 0 {
			return os.Remove(path)
		}
		tail.Op = ""
	}
	r := &fileRun{runID: runID, agentID: agentID, path: path, lock: make(chan struct{}, 1)}
	rep.Runs++
	l.runs[runID] = r
	if tail.Op == runs.KindEnded {
		return nil // read when it is used
	}
	torn, err := l.load(r)
	if err != nil {
		return err
	}
	if torn {
		rep.Torn++
	}
	if r.head.Status == runs.StatusInProgress {
		l.stranded = append(l.stranded, runID)
	}
	return nil
}

// fileLine is what the log reads of a line of a run file: the journal's
// key and op, the fields of a head the started and ended records carry,
// and an owner line's.
type fileLine struct {
	Op        string          `json:"op"`
	StartedAt *time.Time      `json:"started_at"`
	Status    string          `json:"status"`
	EndedAt   *time.Time      `json:"ended_at"`
	Outcome   json.RawMessage `json:"outcome"`
	Owner     string          `json:"owner"`
	Node      string          `json:"node"`
}

// opOwner is the op of an owner line.
const opOwner = "owner"

// load reads r's head from its file (its intent and outcome aside), r's
// lock held or r not yet shared. It reports whether the file ends in a
// torn line.
func (l *Runs) load(r *fileRun) (torn bool, err error) {
	h := runs.Head{RunID: r.runID, AgentID: r.agentID, Node: l.node, Status: runs.StatusInProgress}
	var bad error
	seen := false
	jr, err := journal.Read(r.path, func(_ string, raw []byte) {
		// Only what a head needs: a turn's prompt, parameters and output,
		// and a run's intent, are skipped, not built.
		var line fileLine
		if err := json.Unmarshal(raw, &line); err != nil {
			bad = fmt.Errorf("run file %s: %v", r.path, err)
			return
		}
		switch line.Op {
		case opOwner:
			h.Owner = line.Owner
			if line.Node != "" {
				h.Node = line.Node
			}
			return
		case runs.KindStarted:
			if line.StartedAt == nil {
				bad = fmt.Errorf("run file %s: the started record has no started_at", r.path)
				return
			}
			h.StartedAt, seen = *line.StartedAt, true
		case runs.KindTurn:
			h.Turns++
		case runs.KindEnded:
			h.Status, h.EndedAt = line.Status, line.EndedAt
		}
		h.Records++
	})
	if err == nil {
		err = bad
	}
	if err == nil && !seen {
		err = fmt.Errorf("run file %s has no started record", r.path)
	}
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	r.head, r.loaded = h, true
	l.loaded++
	l.mu.Unlock()
	return jr.TruncatedBytes > 0, nil
}

// HeadsLoaded is how many run heads the log holds in memory: those read
// from their files since it opened, and the runs it created.
func (l *Runs) HeadsLoaded() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded
}

// Close closes the open journals; a write after it is refused.
func (l *Runs) Close() error {
	l.mu.Lock()
	l.closed = true
	var open []*journal.Journal
	for e := l.open.Front(); e != nil; e = e.Next() {
		r := e.Value.(*fileRun)
		open = append(open, r.j)
		r.j, r.elem, r.intent = nil, nil, false
	}
	l.open.Init()
	l.nopen -= len(open)
	l.mu.Unlock()
	var errs []error
	for _, j := range open {
		errs = append(errs, j.Close())
	}
	return errors.Join(errs...)
}

// acquire takes the lock of a run, waiting for the append or create that
// holds it, and reads its head from its file if it has not been; release
// with l.release.
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
	gone, loaded := r.gone, r.loaded
	l.mu.Unlock()
	if gone {
		l.release(r)
		return nil, runs.ErrNotFound
	}
	if !loaded {
		if _, err := l.load(r); err != nil {
			l.release(r)
			return nil, fmt.Errorf("%w; move the file aside to drop this run", err)
		}
	}
	return r, nil
}

// release gives back a run's lock, waking whoever waits for an idle
// journal.
func (l *Runs) release(r *fileRun) {
	<-r.lock
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// wakeLocked wakes the openJournal calls waiting for an idle journal.
func (l *Runs) wakeLocked() {
	if l.waiters > 0 {
		close(l.wake)
		l.wake = make(chan struct{})
	}
}

// openJournal returns r's journal, opening it when it is closed; r's lock
// is held. When maxOpen journals are open it closes the least recently
// used idle one first, and when none is idle it waits for one to be.
func (l *Runs) openJournal(ctx context.Context, r *fileRun) (*journal.Journal, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, fmt.Errorf("run %s: %w", r.runID, errRunsClosed)
		}
		if r.j != nil {
			l.open.MoveToFront(r.elem)
			j := r.j
			l.mu.Unlock()
			return j, nil
		}
		if l.nopen < l.maxOpen {
			l.nopen++
			l.mu.Unlock()
			break
		}
		victim := l.idleLocked()
		wake := l.wake
		if victim == nil {
			l.waiters++
		}
		l.mu.Unlock()
		if victim != nil {
			l.shut(victim)
			l.release(victim)
			continue
		}
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = fmt.Errorf("run %s: all %d run journals open at once (max_open_run_journals) are busy: %w", r.runID, l.maxOpen, context.Cause(ctx))
		}
		l.mu.Lock()
		l.waiters--
		l.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	j, _, err := journal.Open(r.path)
	intent := ""
	if err == nil && !r.intent {
		if intent, err = readIntent(r.path); err != nil {
			err = errors.Join(err, j.Close())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.closed {
		// Closed while it opened: Close did not see this one.
		err = errors.Join(fmt.Errorf("run %s: %w", r.runID, errRunsClosed), j.Close())
	}
	if err != nil {
		l.nopen--
		l.wakeLocked()
		return nil, err
	}
	if !r.intent {
		r.head.Intent, r.intent = intent, true
	}
	r.j, r.elem = j, l.open.PushFront(r)
	return j, nil
}

// idleLocked takes the lock of the least recently used run whose journal
// is open and which nothing holds, or returns nil.
func (l *Runs) idleLocked() *fileRun {
	for e := l.open.Back(); e != nil; e = e.Prev() {
		r := e.Value.(*fileRun)
		select {
		case r.lock <- struct{}{}:
			return r
		default:
		}
	}
	return nil
}

// shut closes r's journal, r's lock held; the run's appends all returned,
// durably, so a failure to close the file loses nothing.
func (l *Runs) shut(r *fileRun) {
	l.mu.Lock()
	j := r.j
	if j == nil {
		l.mu.Unlock()
		return
	}
	l.open.Remove(r.elem)
	r.j, r.elem, r.intent, r.head.Intent = nil, nil, false, ""
	l.mu.Unlock()
	_ = j.Close()
	l.mu.Lock()
	l.nopen--
	l.wakeLocked()
	l.mu.Unlock()
}

// ownerLine is the line that records who last started a run.
func ownerLine(owner, node string) []byte {
	b, _ := json.Marshal(struct {
		Key   string `json:"key"`
		Op    string `json:"op"`
		Owner string `json:"owner"`
		Node  string `json:"node"`
	}{opOwner, opOwner, owner, node})
	return b
}

// Start creates the run's file and writes its started record, or takes an
// existing run of the same agent over. The run's node is this daemon.
func (l *Runs) Start(ctx context.Context, h runs.Head, started runs.LogRecord) (runs.Head, bool, error) {
	h.Node = l.node
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
		defer l.release(r)
		if r.agentID != h.AgentID {
			return runs.Head{}, false, runs.ErrNotFound
		}
		l.mu.Lock()
		inProgress := r.head.Status == runs.StatusInProgress
		l.mu.Unlock()
		if inProgress {
			// Durably, so that a restart knows whose it was.
			j, err := l.openJournal(ctx, r)
			if err == nil {
				err = j.Append(ownerLine(h.Owner, h.Node))
			}
			if err != nil {
				return runs.Head{}, false, fmt.Errorf("take run %s over: %w", h.RunID, err)
			}
		}
		l.mu.Lock()
		r.head.Owner, r.head.Node = h.Owner, h.Node
		l.mu.Unlock()
		cur, err := l.fullHead(r)
		return cur, false, err
	}
	h.Status, h.Turns, h.Records, h.EndedAt, h.Outcome = runs.StatusInProgress, 0, 0, nil, nil
	r := &fileRun{runID: h.RunID, agentID: h.AgentID, path: filepath.Join(l.root, encodeID(h.AgentID), encodeID(h.RunID)+".jsonl"),
		lock: make(chan struct{}, 1), loaded: true, head: h, intent: true}
	r.lock <- struct{}{} // nothing appends before the started record is down
	l.runs[h.RunID] = r
	l.loaded++
	l.mu.Unlock()
	defer l.release(r)

	j, err := l.openJournal(ctx, r)
	if err == nil {
		err = j.AppendBatch([][]byte{encodeLine(0, started), ownerLine(h.Owner, h.Node)})
		if err != nil {
			l.shut(r)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		r.gone = true
		delete(l.runs, h.RunID)
		l.loaded--
		return runs.Head{}, false, err
	}
	r.head.Records = 1
	return r.head, true, nil
}

// fullHead is r's head with its intent and outcome, read from the file
// when they are not kept; r's lock is held.
func (l *Runs) fullHead(r *fileRun) (runs.Head, error) {
	l.mu.Lock()
	h, kept := r.head, r.intent
	l.mu.Unlock()
	var err error
	if !kept {
		if h.Intent, err = readIntent(r.path); err != nil {
			return runs.Head{}, err
		}
	}
	if h.Status != runs.StatusInProgress {
		if h.Outcome, err = readOutcome(r.path); err != nil {
			return runs.Head{}, err
		}
	}
	return h, nil
}

// readIntent reads a run's intent from its started record, the first line
// of its file.
func readIntent(path string) (string, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return "", fmt.Errorf("run file %s: its started record: %w", path, err)
	}
	var rec struct {
		Intent string `json:"intent"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return "", fmt.Errorf("run file %s: its started record: %v", path, err)
	}
	return rec.Intent, nil
}

// readOutcome reads an ended run's outcome from its ended record, the
// last line of its file; nil when it has none.
func readOutcome(path string) (json.RawMessage, error) {
	last, err := lastLine(path)
	if err != nil {
		return nil, err
	}
	var line fileLine
	if err := json.Unmarshal(last, &line); err != nil || line.Op != runs.KindEnded {
		return nil, fmt.Errorf("run file %s: the run ended, but its last line is not its ended record", path)
	}
	if len(line.Outcome) == 0 || string(line.Outcome) == "null" {
		return nil, nil
	}
	return line.Outcome, nil
}

// lastLine reads the last whole line of a file, without its newline (a
// torn line after it is not one); nil when the file has none.
func lastLine(path string) ([]byte, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const chunk = 64 << 10
	var tail []byte // the file from some offset to its end
	end := -1       // in tail, the newline that ends the last whole line
	for off := st.Size(); off > 0; {
		n := min(int64(chunk), off)
		off -= n
		buf := make([]byte, n, n+int64(len(tail)))
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, fmt.Errorf("run file %s: %w", path, err)
		}
		tail = append(buf, tail...)
		if end >= 0 {
			end += int(n)
		} else if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			end = i
		}
		if end < 0 {
			continue
		}
		if i := bytes.LastIndexByte(tail[:end], '\n'); i >= 0 {
			return tail[i+1 : end], nil
		}
		if off == 0 {
			return tail[:end], nil
		}
	}
	return nil, nil
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
	defer l.release(r)
	l.mu.Lock()
	status := r.head.Status
	l.mu.Unlock()
	if status != runs.StatusInProgress {
		return runs.Head{}, fmt.Errorf("%w (%s)", runs.ErrEnded, status)
	}
	j, err := l.openJournal(ctx, r)
	if err != nil {
		return runs.Head{}, err
	}
	l.mu.Lock()
	h := r.head
	l.mu.Unlock()
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
		r.head.Status, r.head.EndedAt = batch.End.Status, &at
	}
	h = r.head
	l.mu.Unlock()
	if batch.End != nil {
		// The end is on disk; the journal is not needed any more.
		h.Outcome = batch.End.Outcome
		l.shut(r)
	}
	return h, nil
}

// Head returns a run's head.
func (l *Runs) Head(ctx context.Context, runID string) (runs.Head, error) {
	r, err := l.acquire(ctx, runID)
	if err != nil {
		return runs.Head{}, err
	}
	defer l.release(r)
	return l.fullHead(r)
}

// Records returns a run's records in [from, to), read from its file.
func (l *Runs) Records(ctx context.Context, runID string, from, to int) ([]json.RawMessage, error) {
	r, err := l.acquire(ctx, runID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	n := r.head.Records // durable: what is appended later is past it
	l.mu.Unlock()
	l.release(r)
	if to < 0 || to > n {
		to = n
	}
	if from >= to {
		return []json.RawMessage{}, nil
	}
	recs := []json.RawMessage{}
	seq := 0
	var bad error
	if _, err := journal.Read(r.path, func(_ string, raw []byte) {
		if seq >= to || bad != nil {
			return
		}
		body, owner, err := recordBody(raw)
		switch {
		case err != nil:
			bad = fmt.Errorf("run file %s: %v", r.path, err)
		case owner:
		default:
			if seq >= from {
				recs = append(recs, body)
			}
			seq++
		}
	}); err != nil {
		return nil, err
	}
	return recs, bad
}

// recordBody is a line of a run file as the record was appended: the
// line without the key and op encodeLine put first (in place: Read hands
// each line over). owner says the line is an owner line, not a record.
func recordBody(line []byte) (body json.RawMessage, owner bool, err error) {
	d := json.NewDecoder(bytes.NewReader(line))
	var head [5]json.Token // '{', "key", its value, "op", its value
	for i := range head {
		if head[i], err = d.Token(); err != nil {
			return nil, false, err
		}
	}
	if head[1] != "key" || head[3] != "op" {
		return nil, false, errors.New("a line that does not start with its key and op")
	}
	if head[4] == opOwner {
		return nil, true, nil
	}
	rest := line[d.InputOffset():]
	if len(rest) > 0 && rest[0] == ',' {
		rest[0] = '{'
		return rest, false, nil
	}
	return json.RawMessage("{}"), false, nil
}

// List returns an agent's runs, newest first.
func (l *Runs) List(ctx context.Context, agentID string) ([]runs.Head, error) {
	l.mu.Lock()
	var ids []string
	for id, r := range l.runs {
		if r.agentID == agentID && !r.gone {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	out := []runs.Head{}
	for _, id := range ids {
		h, err := l.Head(ctx, id)
		if errors.Is(err, runs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// Stranded lists the runs found in progress at open that still are.
func (l *Runs) Stranded(ctx context.Context) ([]runs.Head, error) {
	var out []runs.Head
	for _, id := range l.stranded {
		h, err := l.Head(ctx, id)
		if err != nil {
			return nil, err
		}
		if h.Status == runs.StatusInProgress {
			out = append(out, h)
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

// decodeID is the id a file name of encodeID names; false when the name is
// not one encodeID writes.
func decodeID(name string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
