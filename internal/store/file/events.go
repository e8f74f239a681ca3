package file

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/parslee-ai/car-server/internal/atomicfile"
	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/journal"
	"github.com/parslee-ai/car-server/internal/store"
)

// Defaults of the durable event log.
const (
	DefaultEventsRetention = 30 * 24 * time.Hour // events_retention
	DefaultEventsMaxBytes  = 1 << 30             // events_max_bytes
	DefaultAuditHeadEvery  = 1000                // audit_head_every: events between two signed heads
	DefaultAuditHeadPeriod = 10 * time.Second    // audit_head_interval
	// MinEventsMaxBytes is the smallest events_max_bytes: sixteen segments
	// of the smallest size.
	MinEventsMaxBytes = 16 * minSegmentBytes
	minSegmentBytes   = 16 << 10
	maxSegmentBytes   = 64 << 20
)

// EventsConfig says where the durable event log lives and how long it
// keeps what.
type EventsConfig struct {
	Dir        string        // $CAR_HOME/events
	KeyPath    string        // the audit key ($CAR_HOME/audit-key), created at first start
	Node       string        // this daemon's id, in every head
	MaxAge     time.Duration // whole segments older than this go; 0: DefaultEventsRetention
	MaxBytes   int64         // the oldest whole segments go past this; 0: DefaultEventsMaxBytes
	HeadEvery  int           // a signed head after this many events; 0: DefaultAuditHeadEvery
	HeadPeriod time.Duration // and after this long with events unsigned; 0: DefaultAuditHeadPeriod
	// OnHead is told of every signed head once it is durable (the daemon
	// delivers it to subscribers as audit.head). It runs on the goroutine
	// that wrote the head (the writer, or a Sync that found it idle), one
	// head at a time, in order: it must not block.
	OnHead func(auditlog.Head)
	// Report is told of what no caller receives: a corrupt segment found at
	// start, a failed write, a failed retention. It may be nil.
	Report func(error)
	now    func() time.Time
	// written (tests) is told, on the writer, of each write of records
	// ahead of a Sync: the newest record written, not yet fsynced.
	written func(seq uint64)
	// period (tests) replaces the writer's clock, min(HeadPeriod,
	// flushEvery), when set.
	period time.Duration
}

// Events is the durable event log of one daemon: segment files under Dir
// appended through the journal's group commit by one writer goroutine,
// hash-chained by the engine, with signed heads and retention records
// (auditlog). Append never blocks on the disk; Sync waits until what was
// appended is on it. It implements store.Events, with Pos equal to Seq.
type Events struct {
	cfg     EventsConfig
	key     ed25519.PrivateKey
	segSize int64

	mu          sync.Mutex
	pending     []store.EventRecord // their bodies are in penc
	spare       []store.EventRecord
	penc        []byte // the pending records' lines, encoded at Append
	pends       []int  // where each pending record's line ends in penc
	spareEnc    []byte
	spareEnds   []int
	appended    uint64 // seq of the newest record appended
	lastHash    string // its hash
	durable     uint64 // seq of the newest record on disk
	durableHash string // its hash
	synced      chan struct{}
	err         error // a failed write: what Sync reports from then on
	closing     bool
	wanted      bool        // a Sync waits: the writer writes what it holds now
	segs        []*segIndex // oldest first; the last is the active one
	count       int
	bytes       int64
	heads       int // signed heads written since start

	wake    chan struct{}
	stopped chan struct{}
	// headFile hands the newest signed head to the goroutine that keeps it in
	// the head file (its rename and two fsyncs off the writer's path); a
	// newer head replaces one not yet written.
	headFile     chan auditlog.Head
	headFileDone chan struct{}

	// wmu makes one goroutine the writer at a time: the writer goroutine
	// (run), or a Sync that found it idle. What follows is the writer's,
	// under wmu.
	wmu        sync.Mutex
	held       []store.EventRecord // taken from pending, not yet written
	hends      []int
	henc       []byte
	active     *journal.Journal
	activeSize int64 // bytes written to the active segment, fsynced or not
	syncedSize int64 // of which fsynced (and indexed)
	// unsynced are the records written to the active segment ahead of a
	// Sync (WriteLines), not yet fsynced: indexed, counted and durable
	// once they are; unsyncedOffs is where each one's line starts.
	unsynced     []store.EventRecord
	unsyncedOffs []int64
	headSeq      uint64
	headAt       time.Time
}

var _ store.Events = (*Events)(nil)

// OpenEvents opens (creating) the event log in cfg.Dir: a segment whose
// index file still matches its size is taken from its index; any other is
// read through (the newest through the journal, which cuts a torn last
// line) and indexed again, a corrupt one reported (cfg.Report) and kept;
// then a new active segment is started and the retention applied.
func OpenEvents(cfg EventsConfig) (*Events, error) {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultEventsRetention
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultEventsMaxBytes
	}
	if cfg.HeadEvery <= 0 {
		cfg.HeadEvery = DefaultAuditHeadEvery
	}
	if cfg.HeadPeriod <= 0 {
		cfg.HeadPeriod = DefaultAuditHeadPeriod
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	key, err := auditlog.LoadOrCreateKey(cfg.KeyPath)
	if err != nil {
		return nil, err
	}
	e := &Events{cfg: cfg, key: key, segSize: min(max(cfg.MaxBytes/16, minSegmentBytes), maxSegmentBytes),
		synced: make(chan struct{}), wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		headFile: make(chan auditlog.Head, 1), headFileDone: make(chan struct{})}
	if err := e.load(); err != nil {
		return nil, err
	}
	if err := e.startSegment(); err != nil {
		return nil, err
	}
	e.retain()
	go e.keepHeads()
	go e.run()
	return e, nil
}

// report tells cfg.Report of err.
func (e *Events) report(err error) {
	if e.cfg.Report != nil {
		e.cfg.Report(err)
	}
}

// load reads every segment's index and the chain's end.
func (e *Events) load() error {
	names, err := auditlog.Segments(e.cfg.Dir)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	for i, name := range names {
		path := filepath.Join(e.cfg.Dir, name)
		// A segment whose index still matches its size was sealed whole
		// (a clean shutdown or a roll): no torn tail to cut, nothing to
		// read. Any other is read through, the newest through the
		// journal, which cuts a torn last line.
		x, ok := readIndex(e.cfg.Dir, name)
		if !ok {
			if _, err := os.Stat(indexPath(path)); err == nil {
				e.report(fmt.Errorf("event log: segment %s changed after it was sealed (its size no longer matches its index); it is read again and kept, and `car-server audit verify` says what changed", name))
			}
			if i == len(names)-1 {
				j, _, err := journal.Open(path, journal.AppendOnly())
				if err != nil {
					e.report(fmt.Errorf("event log: the newest segment %s does not open; it is kept and a new one started: %w", name, err))
				} else if err := j.Close(); err != nil {
					return fmt.Errorf("event log: %w", err)
				}
			}
			var err error
			x, err = scanIndex(e.cfg.Dir, name)
			if err != nil {
				e.report(fmt.Errorf("event log: segment %s is corrupt; it is kept, its readable events are served, and `car-server audit verify` names the damage: %w", name, err))
			} else if err := writeIndex(e.cfg.Dir, x); err != nil {
				return fmt.Errorf("event log: index segment %s: %w", name, err)
			}
		}
		e.segs = append(e.segs, x)
		e.count += x.Count
		e.bytes += x.Size
		if x.Count > 0 {
			e.appended, e.lastHash = x.LastSeq, x.LastHash
		}
	}
	e.durable, e.durableHash = e.appended, e.lastHash
	e.headSeq = e.appended
	if h, ok, err := auditlog.ReadHeadFile(filepath.Join(e.cfg.Dir, auditlog.HeadFile)); err != nil {
		e.report(fmt.Errorf("event log: %w", err))
	} else if ok && h.Seq > e.appended {
		e.report(fmt.Errorf("event log: the log ends at event %d, below the signed head at event %d: events were removed; `car-server audit verify` says more; the chain continues from event %d", e.appended, h.Seq, e.appended))
	}
	return nil
}

// startSegment opens a new active segment for the events after the newest
// (reusing the newest segment when it holds no event).
func (e *Events) startSegment() error {
	e.mu.Lock()
	name := auditlog.SegmentName(e.durable + 1)
	path := filepath.Join(e.cfg.Dir, name)
	if n := len(e.segs); n > 0 && e.segs[n-1].Name == name {
		e.bytes -= e.segs[n-1].Size
		e.segs = e.segs[:n-1] // empty: it becomes the active one again
	}
	e.mu.Unlock()
	os.Remove(indexPath(path))
	j, _, err := journal.Open(path, journal.AppendOnly())
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	x, err := scanIndex(e.cfg.Dir, name)
	if err != nil && !errors.Is(err, auditlog.ErrTorn) {
		j.Close()
		return fmt.Errorf("event log: %w", err)
	}
	if err := atomicfile.SyncDir(e.cfg.Dir); err != nil {
		j.Close()
		return fmt.Errorf("event log: %w", err)
	}
	e.mu.Lock()
	e.segs = append(e.segs, x)
	e.bytes += x.Size
	e.mu.Unlock()
	e.active, e.activeSize, e.syncedSize = j, x.Size, x.Size
	return nil
}

// aheadBytes is how many bytes of queued lines wake the writer to write
// them ahead of a Sync: written to the segment and their writeback
// started, not fsynced, so that the fsync a reply waits for has at most
// about this much left to write (what was appended since).
const aheadBytes = 64 << 10

// Append queues r for the writer, its line encoded at once: r.Body is
// copied, and the caller may reuse it once Append returns (the engine
// lends it from a pool). Encoding here, while the proposal that appends
// runs, leaves a reply waiting only for the write. Append never waits on
// the disk.
func (e *Events) Append(r store.EventRecord) {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return
	}
	before := len(e.penc)
	e.penc = auditlog.AppendEvent(e.penc, r.Seq, r.At, r.Node, r.Kind, r.ProposalID, r.Hash, r.PrevHash, r.Body)
	e.pends = append(e.pends, len(e.penc))
	r.Body = nil
	e.pending = append(e.pending, r)
	e.appended, e.lastHash = r.Seq, r.Hash
	// The writer is woken by a reply waiting (Sync), by its clock, or by
	// lines worth writing ahead (once, as they reach aheadBytes): not by
	// every event, which would cost the appender a wake-up of another
	// goroutine each time.
	full := before < aheadBytes && len(e.penc) >= aheadBytes
	e.mu.Unlock()
	if full {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// Sync returns once every record appended before the call is on disk, or
// with the error of the write that failed, or with ctx's. When the writer
// is idle, Sync writes and fsyncs what is queued itself (ctx is then not
// seen until the fsync returns), and with it what the writer would do
// after that write: a signed head, and a segment's roll with the retention
// when the segment is full. Handing the write to the writer and its end
// back would add two goroutine wake-ups to the wait.
func (e *Events) Sync(ctx context.Context) error {
	e.mu.Lock()
	target := e.appended
	if e.durable < target && e.err == nil && !e.closing && e.wmu.TryLock() {
		e.mu.Unlock()
		if e.active != nil { // nil: a failed roll, or stopped
			e.take()
			e.writeHeld(true, false)
		}
		e.wmu.Unlock()
		e.mu.Lock()
	}
	for e.durable < target && e.err == nil {
		ch := e.synced
		e.wanted = true
		e.mu.Unlock()
		select {
		case e.wake <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		e.mu.Lock()
	}
	err := e.err
	e.mu.Unlock()
	return err
}

// spareMax is the largest buffer of encoded lines the writer keeps for
// the next appends.
const spareMax = 4 << 20

// flushEvery bounds how long an appended event waits in memory when no
// reply waits for it: the unsynced tail a crash may lose.
const flushEvery = time.Second

// run is the writer: it takes the lines appended when woken (by a
// waiting reply, its clock, or aheadBytes of lines). It writes them ahead
// (written, their writeback started, not fsynced) once aheadBytes are
// held, and writes and fsyncs what is left (one write and one fsync
// through the journal per segment's worth, the fsync covering what was
// written ahead) when a reply waits for it (Sync), when 4 MiB or a
// segment's worth is unsynced, every flushEvery, and at Close. It signs
// heads, rolls segments and applies the retention.
func (e *Events) run() {
	defer close(e.stopped)
	period := min(e.cfg.HeadPeriod, flushEvery)
	if e.cfg.period > 0 {
		period = e.cfg.period
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	limit := min(e.segSize, 4<<20)
	for {
		timed := false
		select {
		case <-e.wake:
		case <-tick.C:
			timed = true
		}
		e.wmu.Lock()
		closing, wanted := e.take()
		sync := wanted || timed || closing || e.activeSize-e.syncedSize+int64(len(e.henc)) >= limit
		if sync || len(e.henc) >= aheadBytes {
			e.writeHeld(sync, timed || closing)
		}
		if timed {
			e.retain()
		}
		if closing {
			e.seal()
			e.wmu.Unlock()
			return
		}
		e.wmu.Unlock()
	}
}

// take moves the records appended since the last take to the held ones,
// and says whether Close was called and whether a Sync waits. e.wmu is
// held.
func (e *Events) take() (closing, wanted bool) {
	e.mu.Lock()
	batch, benc, bends, closing, wanted := e.pending, e.penc, e.pends, e.closing, e.wanted
	e.pending, e.spare, e.wanted = e.spare[:0], nil, false
	e.penc, e.pends, e.spareEnc, e.spareEnds = e.spareEnc[:0], e.spareEnds[:0], nil, nil
	e.mu.Unlock()
	if len(e.henc) == 0 { // the usual case: take the lines as they are
		e.henc, benc = benc, e.henc
	} else {
		base := len(e.henc)
		e.henc = append(e.henc, benc...)
		for i := range bends {
			bends[i] += base
		}
	}
	e.hends = append(e.hends, bends...)
	e.held = append(e.held, batch...)
	clear(batch)
	e.mu.Lock()
	if e.spare == nil {
		e.spare = batch[:0]
	}
	if e.spareEnc == nil && cap(benc) <= spareMax {
		e.spareEnc, e.spareEnds = benc[:0], bends[:0]
	}
	e.mu.Unlock()
	return closing, wanted
}

// writeHeld writes the held records (write) and lets them go. e.wmu is
// held.
func (e *Events) writeHeld(sync, timed bool) {
	e.write(e.held, e.henc, e.hends, sync, timed)
	clear(e.held)
	e.held, e.hends, e.henc = e.held[:0], e.hends[:0], e.henc[:0]
}

// write appends the held records, encoded in enc (ends[i] is where the
// line of batch[i] ends), a segment's worth at a time. With sync it
// fsyncs them (and what was written ahead before them), with, when it is
// due, a signed head of the newest in the same journal batch, then
// indexes them and wakes Sync; else it writes them ahead, unless a piece
// fills the segment (see writeSome).
func (e *Events) write(batch []store.EventRecord, enc []byte, ends []int, sync, timed bool) {
	if len(batch) == 0 {
		if !sync {
			return
		}
		if len(e.unsynced) > 0 || e.durable > e.headSeq {
			e.writeSome(nil, nil, nil, true, timed)
		} else {
			e.wakeSync()
		}
		return
	}
	start := 0
	for start < len(batch) {
		// As many records as fit in the active segment, one at least.
		room := e.segSize - e.activeSize
		n, from := start, 0
		if start > 0 {
			from = ends[start-1]
		}
		for n < len(batch) && (n == start || int64(ends[n]-from) <= room) {
			n++
		}
		// The last piece ends at the end of enc: a head line may be
		// appended to it in place. Any other is followed by lines still
		// to be written, which an append must not overwrite.
		piece := enc[from:ends[n-1]]
		last := n == len(batch)
		if !last {
			piece = piece[:len(piece):len(piece)]
		}
		// A piece that fills the segment is fsynced: the segment is then
		// sealed, its index written.
		full := !last || e.activeSize+int64(len(piece)) >= e.segSize
		if !e.writeSome(batch[start:n], piece, ends[start:n], sync || full, timed && last) {
			return
		}
		start = n
	}
}

// wakeSync wakes the Sync waiters to look again.
func (e *Events) wakeSync() {
	e.mu.Lock()
	close(e.synced)
	e.synced = make(chan struct{})
	e.mu.Unlock()
}

// writeSome writes the records recs, encoded in enc (ends[i] is where the
// line of recs[i] ends, counted from the start of the whole batch's
// encoding). With sync it writes and fsyncs them with the records written
// ahead before them (AppendLines, or the journal's Sync when enc is
// empty), indexes them all, makes them durable, wakes Sync, and rolls the
// segment when it is full; a head line, when one is due, is appended to
// enc (in its spare capacity, which the caller leaves free). Without, it
// writes them ahead (WriteLines), to be fsynced and indexed by the next
// synced write. The lines go to the journal as they are (they are ours,
// encoded by auditlog, not read again). It returns false when the write
// failed.
func (e *Events) writeSome(recs []store.EventRecord, enc []byte, ends []int, sync, timed bool) bool {
	offs := make([]int64, len(recs))
	base := 0
	if len(ends) > 0 {
		base = ends[0] - lineLen(enc, 0)
	}
	off := e.activeSize
	prev := 0
	for i := range recs {
		end := ends[i] - base
		offs[i] = off
		off += int64(end - prev)
		prev = end
	}
	lastSeq, lastHash := e.durable, e.durableHash
	if n := len(e.unsynced); n > 0 {
		lastSeq, lastHash = e.unsynced[n-1].Seq, e.unsynced[n-1].Hash
	}
	if n := len(recs); n > 0 {
		lastSeq, lastHash = recs[n-1].Seq, recs[n-1].Hash
	}
	if !sync {
		return e.writeAhead(recs, enc, offs, off)
	}
	// A head is due at the first synced write past either bound: it is
	// fsynced with the events it signs, never written ahead of its fsync.
	var head *auditlog.Line
	due := lastSeq > e.headSeq && (lastSeq-e.headSeq >= uint64(e.cfg.HeadEvery) || (timed && e.cfg.now().Sub(e.headAt) >= e.cfg.HeadPeriod) || e.closingNow())
	if due && lastHash != "" {
		head = &auditlog.Line{Op: auditlog.OpHead, Seq: lastSeq, Hash: lastHash, At: e.cfg.now(), Node: e.cfg.Node}
		auditlog.Sign(head, e.key)
		hl := head.Marshal()
		enc = append(enc, hl...)
		off += int64(len(hl))
	}
	n := len(recs)
	if head != nil {
		n++
	}
	if n == 0 && len(e.unsynced) == 0 {
		return true
	}
	var err error
	if n > 0 {
		err = e.active.AppendLines(enc, n) // its fsync covers what was written ahead
	} else {
		err = e.active.Sync()
	}
	e.mu.Lock()
	if err != nil {
		e.failed(err)
	} else {
		x := e.segs[len(e.segs)-1]
		for i := range e.unsynced {
			r := &e.unsynced[i]
			x.add(e.unsyncedOffs[i], r.Seq, r.At, r.ProposalID, r.Hash, r.PrevHash)
		}
		for i := range recs {
			r := &recs[i]
			x.add(offs[i], r.Seq, r.At, r.ProposalID, r.Hash, r.PrevHash)
		}
		x.Size = off
		e.bytes += off - e.syncedSize
		e.count += len(e.unsynced) + len(recs)
		e.activeSize, e.syncedSize = off, off
		if len(recs) > 0 || len(e.unsynced) > 0 {
			e.durable, e.durableHash = lastSeq, lastHash
		}
	}
	close(e.synced)
	e.synced = make(chan struct{})
	e.mu.Unlock()
	clear(e.unsynced)
	e.unsynced, e.unsyncedOffs = e.unsynced[:0], e.unsyncedOffs[:0]
	if err != nil {
		return false
	}
	if head != nil {
		e.headSeq, e.headAt = head.Seq, head.At
		h := auditlog.HeadOf(head)
		e.keepHead(h)
		e.mu.Lock()
		e.heads++
		e.mu.Unlock()
		if e.cfg.OnHead != nil {
			e.cfg.OnHead(h)
		}
	}
	e.maybeRoll()
	return e.active != nil
}

// writeAhead writes recs, encoded in enc (offs[i] is where the line of
// recs[i] starts, end where the last ends), to the active segment without
// an fsync: they are indexed and durable at the next synced write. It
// returns false when the write failed.
func (e *Events) writeAhead(recs []store.EventRecord, enc []byte, offs []int64, end int64) bool {
	if len(recs) == 0 {
		return true
	}
	if err := e.active.WriteLines(enc, len(recs)); err != nil {
		e.mu.Lock()
		e.failed(err)
		e.mu.Unlock()
		e.wakeSync()
		return false
	}
	e.unsynced = append(e.unsynced, recs...)
	e.unsyncedOffs = append(e.unsyncedOffs, offs...)
	e.activeSize = end
	if e.cfg.written != nil {
		e.cfg.written(recs[len(recs)-1].Seq)
	}
	return true
}

// failed records the write that failed: what Sync reports from then on.
// e.mu is held.
func (e *Events) failed(err error) {
	if e.err == nil {
		e.report(fmt.Errorf("event log: a write failed; no further event is written until restart: %w", err))
	}
	e.err = err
}

// keepHead hands h to keepHeads, replacing a head not yet written. Its
// callers write under wmu (the writer, or a Sync writing in its caller),
// so one at a time.
func (e *Events) keepHead(h auditlog.Head) {
	for {
		select {
		case e.headFile <- h:
			return
		default:
			select {
			case <-e.headFile:
			default:
			}
		}
	}
}

// keepHeads writes each head it is handed to the head file, until Close.
func (e *Events) keepHeads() {
	defer close(e.headFileDone)
	for h := range e.headFile {
		if err := auditlog.WriteHeadFile(filepath.Join(e.cfg.Dir, auditlog.HeadFile), h); err != nil {
			e.report(fmt.Errorf("event log: keep the newest signed head: %w", err))
		}
	}
}

// lineLen is the length of the line of enc that starts at i, newline
// included.
func lineLen(enc []byte, i int) int {
	return bytes.IndexByte(enc[i:], '\n') + 1
}

// closingNow says whether Close was called.
func (e *Events) closingNow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing
}

// maybeRoll seals the active segment once it reaches the segment size,
// starts the next one and applies the retention.
func (e *Events) maybeRoll() {
	if e.activeSize < e.segSize {
		return
	}
	if !e.seal() {
		return
	}
	if err := e.startSegment(); err != nil {
		e.mu.Lock()
		e.err = err
		e.mu.Unlock()
		e.report(fmt.Errorf("event log: start the next segment; no further event is written until restart: %w", err))
		return
	}
	e.retain()
}

// seal closes the active segment and writes its index.
func (e *Events) seal() bool {
	if e.active == nil {
		return false
	}
	err := e.active.Close()
	e.active = nil
	e.mu.Lock()
	x := *e.segs[len(e.segs)-1]
	e.mu.Unlock()
	if err == nil {
		err = writeIndex(e.cfg.Dir, &x)
	}
	if err != nil {
		e.report(fmt.Errorf("event log: seal segment %s: %w", x.Name, err))
		return false
	}
	return true
}

// retain deletes the oldest whole sealed segments while the log is over
// MaxBytes or their newest event is older than MaxAge. Before it deletes,
// it appends a signed retention record naming the first event kept and its
// link, so that the log still verifies from there. It runs with nothing
// written ahead (at start, after a synced write on the clock, after a
// roll): the record's append is fsynced and counted as the segment's.
func (e *Events) retain() {
	now := e.cfg.now()
	e.mu.Lock()
	drop, total := 0, e.bytes
	for drop < len(e.segs)-1 {
		x := e.segs[drop]
		old := x.Count == 0 || now.Sub(x.LastAt) > e.cfg.MaxAge
		if total <= e.cfg.MaxBytes && !old {
			break
		}
		total -= x.Size
		drop++
	}
	if drop == 0 {
		e.mu.Unlock()
		return
	}
	firstSeq, firstPrev := e.durable+1, e.durableHash
	for _, x := range e.segs[drop:] {
		if x.Count > 0 {
			firstSeq, firstPrev = x.FirstSeq, x.FirstPrev
			break
		}
	}
	gone := slices.Clone(e.segs[:drop])
	e.mu.Unlock()
	rec := auditlog.Line{Op: auditlog.OpRetention, Seq: firstSeq, PrevHash: firstPrev, At: now, Node: e.cfg.Node}
	auditlog.Sign(&rec, e.key)
	if e.active == nil {
		return // a failed roll: no segment to write the record in
	}
	line := rec.Marshal()
	if err := e.active.Append(line[:len(line)-1]); err != nil {
		e.report(fmt.Errorf("event log: retention: %w", err))
		return
	}
	e.mu.Lock()
	e.segs[len(e.segs)-1].Size += int64(len(line))
	e.bytes += int64(len(line))
	e.mu.Unlock()
	e.activeSize += int64(len(line))
	e.syncedSize = e.activeSize
	for _, x := range gone {
		path := filepath.Join(e.cfg.Dir, x.Name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.report(fmt.Errorf("event log: retention: %w", err))
		}
		os.Remove(indexPath(path))
	}
	if err := atomicfile.SyncDir(e.cfg.Dir); err != nil {
		e.report(fmt.Errorf("event log: retention: %w", err))
	}
	e.mu.Lock()
	e.segs = e.segs[drop:]
	for _, x := range gone {
		e.bytes -= x.Size
		e.count -= x.Count
	}
	e.mu.Unlock()
}

// Close writes what is queued and a signed head of the newest event, seals
// the active segment and stops the writer.
func (e *Events) Close() error {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		<-e.stopped
		return nil
	}
	e.closing = true
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	<-e.stopped
	close(e.headFile) // the writer has stopped: no head comes after
	<-e.headFileDone
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
