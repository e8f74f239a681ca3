package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/metrics"
)

// OpTombstone deletes a key.
const OpTombstone = "tombstone"

// Report says what Open found.
type Report struct {
	Lines          int // records replayed
	Live           int // keys with a value
	TruncatedBytes int // a torn tail that was cut off (crash residue, see tornTail)
}

// Journal is an open journal file. It is safe for concurrent use.
type Journal struct {
	path string

	mu         sync.Mutex
	work       *sync.Cond // signalled when records are queued, a snapshot is written, or the journal closes
	idle       *sync.Cond // signalled when a compaction ends
	f          *os.File
	live       map[string][]byte // key -> its last record
	lines      int               // records in the file
	closing    bool
	queue      []pending   // records waiting for the next write, all of them in group
	gather     int         // while the flusher waits for the queue to reach this length, appenders below it do not wake it
	group      *flushGroup // the write the queued records wait for; nil while none is queued
	spare      []pending   // the queue's other slice, reused batch after batch
	broken     error       // a failed write: no append succeeds until reopened
	dirty      bool        // records were written (Write) and not yet flushed
	busy       bool        // a write is on its way, the flusher's or a caller's (writeHere): no other starts
	closeErr   error       // the flush at Close failed
	minDead    int         // compaction waits for at least this many dead records
	appendOnly bool        // a log: records are not kept by key and never compacted
	retryAt    int         // after a failed automatic compaction, the next waits for this many records
	compaction *compaction // the compaction in progress, if any
	rewrites   sync.WaitGroup
	stopped    chan struct{}

	errorLog   func(error)  // errors no caller receives
	midRewrite func() error // tests: runs between writing a snapshot and syncing it
	// tests, set under mu: queued sees the queue's length whenever it
	// changes, writing the records of each write before it starts, and
	// gatherFor replaces a quarter of the last write's time.
	queued    func(records int)
	writing   func(records int)
	gatherFor func(took time.Duration) time.Duration
}

// Option configures a journal at Open.
type Option func(*Journal)

// WithErrorLog sends errors no caller receives (a failed automatic
// compaction) to log instead of the default slog logger. log runs on the
// journal's writer: it must not block or call the journal.
func WithErrorLog(log func(error)) Option {
	return func(j *Journal) { j.errorLog = log }
}

// AppendOnly makes the journal a log: every record stays in the file,
// none is kept in memory by its key (Get finds nothing, Each sees nothing)
// and the file is never compacted. Replay and the cut of a torn tail are
// the same.
func AppendOnly() Option {
	return func(j *Journal) { j.appendOnly = true }
}

// logError reports an error no caller receives.
func (j *Journal) logError(err error) {
	if j.errorLog != nil {
		j.errorLog(err)
		return
	}
	slog.Error("journal compaction failed", "path", j.path, "err", err)
}

type pending struct {
	key  string
	line []byte // with its newline; AppendLines: several lines, the caller's
	tomb bool
	recs int  // records in line: 1, or AppendLines's n
	lent bool // line is the caller's (AppendLines): not kept once written
}

// flushGroup is one write and fsync of the flusher: every record queued
// while the one before was on its way. Its appenders wait on done, one
// channel closed for all of them rather than a channel and a send each.
type flushGroup struct {
	done chan struct{}
	err  error // set before done is closed
	sync bool  // an appender of the group waits for the flush (Append, or Sync); else the write is enough (Write)
}

// end answers every appender of the group.
func (g *flushGroup) end(err error) {
	g.err = err
	close(g.done)
}

// Open replays the journal at path (creating it, 0600, in a 0700 directory)
// and opens it for appending. A symbolic link at path is refused
// (atomicfile.ErrSymlink), as by Verify and Read. A torn tail (see
// tornTail: bytes after the last newline, or from a line holding a zero
// byte, or a last line that is no record) is cut off and reported; any
// other unreadable line is an error naming the file and line.
func Open(path string, opts ...Option) (*Journal, Report, error) {
	// Durable: the file's name (and its directory's, when created) survive
	// a power loss before any record is appended.
	f, err := atomicfile.OpenDurable(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, Report{}, fmt.Errorf("journal %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, Report{}, fmt.Errorf("journal %s: %w", path, err)
	}
	j := &Journal{path: path, f: f, minDead: 64, stopped: make(chan struct{})}
	for _, o := range opts {
		o(j)
	}
	j.work = sync.NewCond(&j.mu)
	j.idle = sync.NewCond(&j.mu)
	rep, err := j.replay()
	if err != nil {
		f.Close()
		return nil, rep, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("journal %s: %w", path, err)
	}
	go j.flusher()
	return j, rep, nil
}

// replay reads every record into the live map, cutting off a torn tail.
// The live records go on sharing the chunks they were read in, and their
// keys the strings of their batches; when most of what was read is dead,
// they are copied out (see repack). So replay keeps at most about twice the
// live records it found, and no more later: a chunk is freed once no record
// in it is live, and records appended later have memory of their own.
func (j *Journal) replay() (Report, error) {
	size := fileSize(j.f)
	hint := 0
	lines, offset, torn, err := scan(j.f, size, !j.appendOnly, j.path, func(batch []record) {
		if j.appendOnly {
			return
		}
		if j.live == nil {
			hint = sizeHint(batch, size)
			j.live = make(map[string][]byte, hint)
		}
		for _, r := range batch {
			if r.tomb {
				delete(j.live, r.key)
			} else {
				j.live[r.key] = r.rec
			}
		}
	})
	if j.live == nil {
		j.live = make(map[string][]byte)
	}
	rep := Report{Lines: lines, Live: len(j.live), TruncatedBytes: torn}
	j.lines = lines
	if err != nil {
		return rep, err
	}
	j.repack(offset, hint)
	if torn > 0 {
		// Crash residue: the append of this line never returned.
		if err := j.f.Truncate(offset); err != nil {
			return rep, fmt.Errorf("journal %s: cut off the torn tail: %w", j.path, err)
		}
		if err := j.f.Sync(); err != nil {
			return rep, fmt.Errorf("journal %s: %w", j.path, err)
		}
	}
	return rep, nil
}

// maxSizeHint bounds the live map's initial size: beyond it the map grows.
const maxSizeHint = 1 << 20

// sizeHint estimates the records of a file of size bytes from its first
// batch, for sizing the live map.
func sizeHint(first []record, size int64) int {
	var n int64
	for _, r := range first {
		n += int64(len(r.rec)) + 1
	}
	return int(min(max(size*int64(len(first))/max(n, 1), int64(len(first))), maxSizeHint))
}

// repack gives the live records a map, a buffer and a string of keys of
// their own when they are less than half of the bytes read (or of the map's
// initial size, hint): the dead records are then not kept in memory.
func (j *Journal) repack(read int64, hint int) {
	var recs, keys int
	for k, rec := range j.live {
		recs += len(rec)
		keys += len(k)
	}
	if 2*int64(recs) >= read && 2*len(j.live) >= hint {
		return
	}
	entries := make([]entry, 0, len(j.live))
	for k, rec := range j.live {
		entries = append(entries, entry{k, rec})
	}
	slab := make([]byte, 0, recs)
	var names strings.Builder
	names.Grow(keys)
	for _, e := range entries {
		names.WriteString(e.key)
	}
	all, start := names.String(), 0
	live := make(map[string][]byte, len(entries))
	for _, e := range entries {
		at := len(slab)
		slab = append(slab, e.rec...)
		live[all[start:start+len(e.key)]] = slab[at:len(slab):len(slab)]
		start += len(e.key)
	}
	j.live = live
}

// Verify reads the journal at path without changing it and reports what it
// holds. A torn tail is reported (Open would cut it off); any other
// unreadable line is an error naming the line.
func Verify(path string) (Report, error) {
	f, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return Report{}, fmt.Errorf("journal %s: %w", path, err)
	}
	defer f.Close()
	live := make(map[string]struct{})
	lines, _, torn, err := scan(f, fileSize(f), false, path, func(batch []record) {
		for _, r := range batch {
			if r.tomb {
				delete(live, r.key)
			} else {
				live[r.key] = struct{}{}
			}
		}
	})
	return Report{Lines: lines, Live: len(live), TruncatedBytes: torn}, err
}

// Read calls f with every record of the journal at path (without its
// newline; f may keep it), in file order, without changing the file. A torn
// tail is skipped and reported; any other unreadable line is an error
// naming the line.
func Read(path string, f func(key string, rec []byte)) (Report, error) {
	file, err := atomicfile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return Report{}, fmt.Errorf("journal %s: %w", path, err)
	}
	defer file.Close()
	lines, _, torn, err := scan(file, fileSize(file), true, path, func(batch []record) {
		for _, r := range batch {
			f(r.key, r.rec)
		}
	})
	return Report{Lines: lines, TruncatedBytes: torn}, err
}

// fileSize is f's size, or 0 when it cannot be read (a hint only).
func fileSize(f *os.File) int64 {
	if st, err := f.Stat(); err == nil {
		return st.Size()
	}
	return 0
}

func (j *Journal) apply(key string, line []byte, tomb bool) {
	if j.appendOnly {
		return
	}
	if tomb {
		delete(j.live, key)
		return
	}
	j.live[key] = bytes.TrimSuffix(line, []byte("\n"))
}

// Get returns the last record of key (without its newline).
func (j *Journal) Get(key string) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec, ok := j.live[key]
	return rec, ok
}

// Append writes a record durably. rec must be a JSON object with "key" and
// "op"; a tombstone deletes its key. It returns after the record is fsynced.
func (j *Journal) Append(rec []byte) error {
	return j.AppendBatch([][]byte{rec})
}

// AppendBatch writes records durably, in order, with one write and one
// fsync when nothing else is queued. It returns after all of them are
// fsynced, or with the first error; after a crash a prefix of the batch may
// be on disk, never a record without the ones before it.
func (j *Journal) AppendBatch(recs [][]byte) error {
	return j.enqueue(recs, true)
}

// Write writes records as AppendBatch does, but returns once they are
// written to the file, before they are flushed: Get sees them, a process
// crash keeps them (they are in the kernel's page cache), a power loss may
// lose them until a Sync (or an Append's flush, which covers every record
// written before it) has returned. What a power loss leaves of them is
// cut to a prefix of what was written at the next Open (see tornTail).
func (j *Journal) Write(recs [][]byte) error {
	return j.enqueue(recs, false)
}

// Sync returns once every record written before it (Write) is flushed to
// disk, at once when there is none.
func (j *Journal) Sync() error {
	j.mu.Lock()
	if err := j.unusable(); err != nil {
		j.mu.Unlock()
		return err
	}
	if !j.dirty && j.group == nil {
		j.mu.Unlock()
		return nil
	}
	if j.group == nil {
		j.group = &flushGroup{done: make(chan struct{})}
	}
	g := j.group
	g.sync = true
	j.work.Signal()
	j.mu.Unlock()
	<-g.done
	return g.err
}

// Err is the error that stops the journal taking records (a failed write
// or flush, or Close), or nil.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unusable()
}

// enqueue queues records for the flusher and waits for their write, and
// with flush for its fsync too.
func (j *Journal) enqueue(recs [][]byte, flush bool) error {
	var one [1]pending // a single record queues without a slice of its own
	batch := one[:0]
	if len(recs) > 1 {
		batch = make([]pending, 0, len(recs))
	}
	for _, rec := range recs {
		key, tomb, err := parse(bytes.TrimSuffix(rec, []byte("\n")))
		if err != nil {
			return fmt.Errorf("journal %s: refusing a bad record: %v", j.path, err)
		}
		if bytes.ContainsAny(rec, "\n") {
			return fmt.Errorf("journal %s: a record must be one line", j.path)
		}
		batch = append(batch, pending{key: string(key), line: append(append(make([]byte, 0, len(rec)+1), rec...), '\n'), tomb: tomb, recs: 1})
	}
	j.mu.Lock()
	return j.submit(batch, flush) // unlocks
}

// AppendLines writes n records durably, as AppendBatch does, from buf:
// the records already encoded, each on one line ending in its newline, in
// order. It is the append of a log whose lines its caller encoded itself
// (the event log's segments): only an AppendOnly journal takes it, since
// such a journal keeps no record by its key, and it does not read the
// records' JSON for their keys as Append does. The caller vouches that
// every line is a JSON object with a string "key" and an "op" (a line that
// is not makes the file unreadable: Open and Read refuse it). What needs
// no parse is still checked: buf holds exactly n whole lines, each
// between braces, and no zero byte (a power loss's mark, see tornTail: a
// zero byte would have these records cut off at the next Open). buf is
// neither changed nor kept once AppendLines returns.
func (j *Journal) AppendLines(buf []byte, n int) error {
	return j.submitLines(buf, n, true, "AppendLines")
}

// WriteLines is AppendLines without the fsync, as Write is AppendBatch
// without it: it returns once the lines are written to the file (a
// process crash keeps them, a power loss may not until a Sync, or an
// AppendLines's fsync, which covers them, has returned). It also asks the
// kernel to start writing them to the disk without waiting for it (see
// startWriteback), so that the fsync that follows has less left to wait
// for.
func (j *Journal) WriteLines(buf []byte, n int) error {
	return j.submitLines(buf, n, false, "WriteLines")
}

// submitLines is AppendLines, and with flush false WriteLines (named by name).
func (j *Journal) submitLines(buf []byte, n int, flush bool, name string) error {
	if !j.appendOnly {
		return fmt.Errorf("journal %s: %s is for an append-only journal", j.path, name)
	}
	if err := checkLines(buf, n); err != nil {
		return fmt.Errorf("journal %s: refusing a bad record: %v", j.path, err)
	}
	one := [1]pending{{line: buf, recs: n, lent: true}}
	j.mu.Lock()
	return j.submit(one[:min(n, 1)], flush) // unlocks
}

// checkLines says what is wrong with buf as n encoded records (see
// AppendLines), reading no JSON.
func checkLines(buf []byte, n int) error {
	if n < 0 {
		return fmt.Errorf("%d records", n)
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		return errors.New("a zero byte in a record")
	}
	for i := range n {
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			return fmt.Errorf("%d lines, want %d", i, n)
		}
		if end < 2 || buf[0] != '{' || buf[end-1] != '}' {
			return fmt.Errorf("line %d of %d is not a JSON object", i+1, n)
		}
		buf = buf[end+1:]
	}
	if len(buf) > 0 {
		return fmt.Errorf("more than %d lines, or a last line without its newline", n)
	}
	return nil
}

// submit writes batch (in the caller when the journal is idle, else
// queued for the flusher) and waits for its write, and with flush for its
// fsync too. j.mu is held; submit unlocks it.
func (j *Journal) submit(batch []pending, flush bool) error {
	if err := j.unusable(); err != nil {
		j.mu.Unlock()
		return err
	}
	if len(batch) == 0 { // nothing to write: no group for the flusher to end
		j.mu.Unlock()
		return nil
	}
	if j.group == nil && !j.busy && j.gather == 0 && j.compaction == nil && j.writing == nil {
		return j.writeHere(batch, flush) // unlocks
	}
	if j.group == nil {
		j.group = &flushGroup{done: make(chan struct{})}
	}
	g := j.group
	g.sync = g.sync || flush
	j.queue = append(j.queue, batch...)
	if j.gather == 0 || len(j.queue) >= j.gather {
		j.work.Signal()
	}
	if j.queued != nil {
		j.queued(len(j.queue))
	}
	j.mu.Unlock()
	<-g.done
	return g.err
}

// writeHere writes a batch in the caller, and with flush fsyncs it (and
// what Writes left unflushed), while the flusher is idle: nothing queued,
// no write on its way, not gathering the appenders of its last write, no
// compaction. Handing the batch to the flusher and back would add two
// goroutine hand-offs to the caller's wait. Appends that arrive meanwhile
// queue for the flusher, which waits for this I/O to end, and share its
// next write and fsync, as they would have shared one of the flusher's.
// j.mu is held; writeHere unlocks it.
func (j *Journal) writeHere(batch []pending, flush bool) error {
	buf := joined(batch)
	j.busy = true
	f := j.f
	j.mu.Unlock()
	start := time.Now()
	_, err := f.Write(buf)
	if err == nil && flush {
		err = f.Sync()
		metrics.FsyncSeconds.Observe(time.Since(start).Seconds())
	} else if err == nil && j.appendOnly {
		startWriteback(f)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.busy = false
	if err = j.settle(batch, err); err == nil {
		j.dirty = !flush
		j.maybeCompact()
	}
	if j.group != nil || j.closing || j.snapshotWritten() {
		j.work.Signal() // the flusher waited for this write to end
	}
	return err
}

// settle records how the write of batch ended, with mu held: a failed
// write breaks the journal (the error it returns says so); a written batch
// is applied, and carried into a compaction under way, whose snapshot does
// not hold it.
func (j *Journal) settle(batch []pending, err error) error {
	if err != nil {
		j.broken = fmt.Errorf("journal %s: write failed, no further records are accepted until restart: %w", j.path, err)
		return j.broken
	}
	for _, p := range batch {
		j.apply(p.key, p.line, p.tomb)
		j.lines += p.recs
	}
	if c := j.compaction; c != nil {
		for _, p := range batch {
			c.carry = append(c.carry, p.kept())
		}
	}
	return nil
}

// joined is the lines of batch as one write: a lone record's line as it
// is (it is not changed while it is written), else a copy of them all.
func joined(batch []pending) []byte {
	if len(batch) == 1 {
		return batch[0].line
	}
	size := 0
	for _, p := range batch {
		size += len(p.line)
	}
	buf := make([]byte, 0, size)
	for _, p := range batch {
		buf = append(buf, p.line...)
	}
	return buf
}

// kept is p's line to keep after its write: a copy when it is the
// caller's.
func (p pending) kept() []byte {
	if p.lent {
		return bytes.Clone(p.line)
	}
	return p.line
}

// flusher is the journal's one writer: it takes everything queued, writes
// it with one write and one fsync (none when every record of the batch came
// from Write and no Sync waits), and answers every appender of the batch.
// Records queued while it does I/O form the next batch (group commit). It
// also finishes compactions (see compact.go). It runs until Close, and then
// until the compaction in progress, if any, is finished.
func (j *Journal) flusher() {
	defer close(j.stopped)
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		for j.busy || (j.group == nil && !j.snapshotWritten() && !(j.closing && j.compaction == nil)) {
			j.work.Wait()
		}
		if j.snapshotWritten() {
			j.finishCompaction(j.compaction)
			continue
		}
		if j.group == nil {
			if j.closing && j.dirty && j.broken == nil {
				// What Write left unflushed is flushed at Close.
				if err := j.f.Sync(); err != nil {
					j.broken = fmt.Errorf("journal %s: flush at close failed: %w", j.path, err)
					j.closeErr = j.broken
				} else {
					j.dirty = false
				}
			}
			return // closing, nothing left
		}
		batch, g := j.queue, j.group
		j.queue, j.group = j.spare[:0], nil
		if j.queued != nil {
			j.queued(0)
		}
		if j.broken != nil {
			// Never write behind a failed write: the file may end in a torn
			// line, and a later fsync can succeed for data an earlier one lost.
			g.end(j.broken)
			j.recycle(batch)
			continue
		}
		buf := joined(batch)
		// A flush covers what earlier Writes left unflushed too.
		f, writing, flush := j.f, j.writing, g.sync && (len(batch) > 0 || j.dirty)
		j.busy = true // no writeHere meanwhile: the file's order is the order records are applied, and dirty stays exact
		j.mu.Unlock()
		if writing != nil && len(batch) > 0 {
			writing(len(batch))
		}
		start := time.Now()
		var err error
		if len(buf) > 0 {
			_, err = f.Write(buf)
		}
		if err == nil && flush {
			err = f.Sync()
		} else if err == nil && len(buf) > 0 && j.appendOnly {
			startWriteback(f)
		}
		took := time.Since(start)
		if flush {
			metrics.FsyncSeconds.Observe(took.Seconds())
		}
		j.mu.Lock()
		j.busy = false
		if err = j.settle(batch, err); err == nil {
			j.dirty = !flush && (j.dirty || len(batch) > 0)
		}
		g.end(err)
		j.recycle(batch)
		j.maybeCompact()
		if n := len(batch); n > 1 && err == nil {
			j.gatherAfter(n, took)
		}
	}
}

// gatherAfter waits, after a write that answered n appenders, until they
// could queue again: until n more records are queued, or a quarter of the
// write's time has passed. Appenders that append again at once then share
// the next write with those that queued during this one, instead of the
// two halves taking turns, each a write of their own. j.mu is held.
func (j *Journal) gatherAfter(n int, took time.Duration) {
	j.gather = len(j.queue) + n
	wait := took / 4
	if j.gatherFor != nil {
		wait = j.gatherFor(took)
	}
	expired := false
	t := time.AfterFunc(wait, func() {
		j.mu.Lock()
		expired = true
		j.work.Signal()
		j.mu.Unlock()
	})
	for !expired && len(j.queue) < j.gather && !j.closing && !j.snapshotWritten() {
		j.work.Wait()
	}
	j.gather = 0
	t.Stop()
}

// recycle keeps a written batch's slice for the queue after next, holding
// none of its records; j.mu is held.
func (j *Journal) recycle(batch []pending) {
	clear(batch)
	j.spare = batch[:0]
}

// Each calls f with every live record, in key order.
func (j *Journal) Each(f func(key string, rec []byte)) {
	j.mu.Lock()
	keys := make([]string, 0, len(j.live))
	for k := range j.live {
		keys = append(keys, k)
	}
	recs := make(map[string][]byte, len(keys))
	for _, k := range keys {
		recs[k] = j.live[k]
	}
	j.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		f(k, recs[k])
	}
}

// Stats returns the records in the file and how many of them are live.
func (j *Journal) Stats() (lines, live int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lines, len(j.live)
}

// Close writes what is queued, flushes what Write left unflushed, finishes
// the compaction in progress, stops the flusher and closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		<-j.stopped
		return nil
	}
	j.closing = true
	j.work.Broadcast()
	j.mu.Unlock()
	<-j.stopped // the flusher writes what is queued, then stops
	j.rewrites.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken == nil {
		j.broken = fmt.Errorf("journal %s is closed", j.path)
	}
	return errors.Join(j.closeErr, j.f.Close())
}

// unusable says why the journal takes no more work (a failed write, or
// Close), or nil. j.mu is held.
func (j *Journal) unusable() error {
	if j.broken != nil {
		return j.broken
	}
	if j.closing {
		return fmt.Errorf("journal %s is closed", j.path)
	}
	return nil
}
