package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/store"
)

// The cluster's audit log: every daemon appends its events to car_events.
//
// Append never waits on the database. Records go to a bounded queue that one
// writer goroutine drains, in batches of what accumulated while the previous
// batch was written, at most one batch per eventsGather (10 ms) unless a
// Flush waits (so the log is behind by about 10 ms and one insert, well
// under 200 ms while the database answers).
//
// A batch is committed without waiting for its flush (synchronous_commit
// off), so the event log adds no flush of its own to a step's: the next
// synchronous commit of this daemon (a step's result, or the writer's own)
// flushes the WAL past it, PostgreSQL flushing in order (walMarks). Until
// then the writer keeps the batch: when a later insert finds the database
// gone, the batches not known flushed go to the spool before it and are
// sent again, so a database crash that took them leaves no gap. Flush (the
// reply to a proposal waits for it) returns once every record appended
// before it is flushed: the writer commits the last batch synchronously,
// or, with nothing left to insert, writes its car_flush row. Batches no
// synchronous commit covered are flushed that way within flushEvery. When an insert fails because the
// database cannot be reached, the batch and everything after it go to the
// spool (fsynced per batch) until a probe, backing off from 100 ms to 5 s,
// finds the database again; the spool is then written out in order before
// anything newer, and emptied. A re-sent batch (an insert whose commit was
// ambiguous, a spool drained again after a crash) changes nothing: (node,
// seq) is unique and the insert skips what is there.
//
// What is refused is counted and logged, never lost silently: a record that
// is not valid (no JSON body), the queue full (the writer stuck for long), the
// spool at its bound, a record the database rejects. Stats reports the
// counts. A refused record leaves a gap in its daemon's hash chain, which
// VerifyChains then reports.

const (
	eventsBatchMax = 1000
	// eventsLockID is the advisory lock every batch insert takes for its
	// transaction. Positions (the bigserial id) are drawn when a row is
	// inserted but become visible when its transaction commits; two writers
	// inserting at once could commit out of order, and a reader of Since that
	// had moved past the later id would never see the earlier one. Under the
	// lock, a batch draws its ids only after the previous batch committed
	// (the lock is released after the commit is visible), so ids become
	// visible in order and Since never skips a row. Ids may still have gaps
	// (a failed insert burns its ids), never late arrivals.
	eventsLockID  = 0x6361722d65767473 // "car-evts"
	eventsQueryMx = 10000              // the most records one Query or Since returns
	probeMin      = 100 * time.Millisecond
	probeMax      = 5 * time.Second
	dropLogEvery  = 10 * time.Second
	// flushEvery bounds how long an inserted batch waits for a flush
	// when no reply waits for it.
	flushEvery = time.Second
	// eventsGather is the least time between two inserts while no Flush
	// waits: the log is behind by at most this and one insert.
	eventsGather = 10 * time.Millisecond
)

// EventStats counts what the event writer did since the store was opened.
type EventStats struct {
	Queued     int    // records waiting in memory
	Batches    uint64 // inserts into the database
	Written    uint64 // records inserted (a re-sent record counts again)
	Spooled    uint64 // records written to the spool
	Dropped    uint64 // records refused: see the log for why
	SpoolBytes int64  // the spool's size now
}

type events struct {
	pool     *pgxpool.Pool
	node     string
	log      *zap.Logger
	bound    time.Duration // one insert's bound
	maxQueue int

	mu       sync.Mutex
	queue    []store.EventRecord
	closed   bool
	lastSeq  uint64 // this daemon's newest record appended (LastOf)
	lastHash string
	appended uint64        // records queued since the start
	settled  uint64        // of those, flushed, spooled or refused
	wanted   bool          // a Flush waits: the writer flushes what it inserted
	synced   chan struct{} // closed (and replaced) when settled moves

	marks      *walMarks
	flushEvery time.Duration   // tests: 0 is the constant
	handled    uint64          // records the writer took (its own)
	unflushed  []insertedBatch // inserted, not known flushed (the writer's own)

	signal chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	sp *spool // the writer's own

	batches, written, spooled, dropped atomic.Uint64
	spoolBytes                         atomic.Int64
	lastDropLog                        atomic.Int64

	// Test hooks, set before the first Append: beforeInsert runs before each
	// insert, afterInsert after a successful one (its error makes the insert
	// count as failed, as a commit whose answer was lost).
	beforeInsert func([]store.EventRecord)
	afterInsert  func() error
}

// insertedBatch is a batch committed without waiting for its flush.
type insertedBatch struct {
	recs []store.EventRecord
	mark uint64 // its walMarks mark: flushed once covered
	end  uint64 // handled once it was taken
}

func openEvents(pool *pgxpool.Pool, cfg Config, marks *walMarks) (*events, error) {
	sp, scan, err := openSpool(cfg.SpoolPath, cfg.SpoolMaxBytes)
	if err != nil {
		return nil, err
	}
	e := &events{
		pool:     pool,
		node:     cfg.Node,
		log:      cfg.Log,
		bound:    cfg.StatementTimeout + cfg.ConnectTimeout,
		maxQueue: cfg.EventQueue,
		signal:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		sp:       sp,
		marks:    marks,
		synced:   make(chan struct{}),

		flushEvery: cfg.eventsFlushEvery,
	}
	if last, ok := scan.last[cfg.Node]; ok {
		e.lastSeq, e.lastHash = last.Seq, last.Hash
	}
	if scan.torn > 0 {
		e.log.Warn("the event spool ended in a line cut short by a crash; it was cut off",
			zap.String("spool", cfg.SpoolPath), zap.Int64("bytes", scan.torn))
		e.countDrop(1, "a spooled line was cut short by a crash")
	}
	if scan.records > 0 {
		e.log.Info("events spooled by an earlier run will be written once the database takes them",
			zap.String("spool", cfg.SpoolPath), zap.Int("records", scan.records))
	}
	e.spoolBytes.Store(sp.size)
	go e.run()
	return e, nil
}

// close flushes what is queued (to the database, or to the spool if it
// cannot be reached, each within one insert's bound) and stops the writer.
func (e *events) close() error {
	var err error
	e.once.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stop)
		<-e.done
		err = e.sp.close()
	})
	return err
}

// Stats returns the writer's counts.
func (e *events) Stats() EventStats {
	e.mu.Lock()
	q := len(e.queue)
	e.mu.Unlock()
	return EventStats{Queued: q, Batches: e.batches.Load(), Written: e.written.Load(), Spooled: e.spooled.Load(),
		Dropped: e.dropped.Load(), SpoolBytes: e.spoolBytes.Load()}
}

// Append queues r for the writer; it never waits. A record without a node
// is this daemon's.
func (e *events) Append(r store.EventRecord) {
	if r.Node == "" {
		r.Node = e.node
	}
	if why := clean(&r); why != "" {
		e.countDrop(1, why)
		return
	}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		e.countDrop(1, "the store is closed")
		return
	case len(e.queue) >= e.maxQueue:
		e.mu.Unlock()
		e.countDrop(1, "the event writer's queue is full: the database has been slow for long")
		return
	}
	e.queue = append(e.queue, r)
	e.appended++
	if r.Node == e.node && r.Seq > e.lastSeq {
		e.lastSeq, e.lastHash = r.Seq, r.Hash
	}
	e.mu.Unlock()
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

// Flush returns once every record appended before the call is in the
// database and flushed there, or in the spool (fsynced) when the database
// cannot take it, or refused (counted and logged). The engine waits for it
// before it answers a proposal.
func (e *events) Flush(ctx context.Context) error {
	e.mu.Lock()
	target := e.appended
	for e.settled < target {
		ch := e.synced
		e.wanted = true
		e.mu.Unlock()
		select {
		case e.signal <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for the event log's flush: %w", ctx.Err())
		case <-e.done:
			return errors.New("wait for the event log's flush: the store is closed")
		}
		e.mu.Lock()
	}
	e.mu.Unlock()
	return nil
}

// settle records that the writer's records up to n are flushed, spooled or
// refused, and wakes the Flush waiters.
func (e *events) settle(n uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n <= e.settled {
		return
	}
	e.settled = n
	close(e.synced)
	e.synced = make(chan struct{})
}

// clean makes r's text storable (PostgreSQL's text holds neither NUL nor
// invalid UTF-8) and says why r cannot be stored at all, if it cannot.
func clean(r *store.EventRecord) string {
	if !json.Valid(r.Body) || !utf8.Valid(r.Body) {
		return "an event whose body is not JSON"
	}
	if r.Seq > math.MaxInt64 {
		return "an event whose seq is out of range"
	}
	for _, s := range []*string{&r.Node, &r.Kind, &r.ProposalID, &r.Hash, &r.PrevHash} {
		if !utf8.ValidString(*s) || strings.ContainsRune(*s, 0) {
			*s = strings.ReplaceAll(strings.ToValidUTF8(*s, "\uFFFD"), "\x00", "\uFFFD")
		}
	}
	return ""
}

// countDrop counts n refused records and logs it, at most once every ten
// seconds with the running total.
func (e *events) countDrop(n int, why string) {
	total := e.dropped.Add(uint64(n))
	now := time.Now().UnixNano()
	last := e.lastDropLog.Load()
	if now-last >= int64(dropLogEvery) && e.lastDropLog.CompareAndSwap(last, now) {
		e.log.Error("audit events were refused and are not in the log", zap.String("why", why),
			zap.Int("now", n), zap.Uint64("total", total))
	}
}

// take returns up to n queued records and whether a Flush waits for them
// to be flushed (they are the queue's tail and a Flush is waiting).
func (e *events) take(n int) (batch []store.EventRecord, wanted bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := min(n, len(e.queue))
	batch = e.queue[:k:k]
	if k == len(e.queue) {
		e.queue = nil
		wanted, e.wanted = e.wanted, false
	} else {
		e.queue = e.queue[k:]
	}
	e.handled += uint64(k)
	return batch, wanted
}

// run is the writer: it owns the spool and is the only one to insert.
func (e *events) run() {
	defer close(e.done)
	backoff := probeMin
	var probe *time.Timer
	var probeC <-chan time.Time
	schedule := func(d time.Duration) {
		probe = time.NewTimer(d)
		probeC = probe.C
	}
	if e.sp.pending() {
		schedule(0)
	}
	every := flushEvery
	if e.flushEvery > 0 {
		every = e.flushEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Records arriving within eventsGather of the last insert wait for the
	// end of it, so that a busy daemon writes a batch per eventsGather, not
	// one per step, unless a Flush waits.
	var gather *time.Timer
	var gatherC <-chan time.Time
	var last time.Time
	for {
		select {
		case <-e.stop:
			if probe != nil {
				probe.Stop()
			}
			e.flush()
			e.flushInserted(true)
			return
		case <-tick.C:
			e.flushInserted(true)
			continue
		case <-e.signal:
			if wait := eventsGather - time.Since(last); wait > 0 && !e.flushWanted() {
				if gather == nil {
					gather = time.NewTimer(wait)
					gatherC = gather.C
				}
				continue
			}
		case <-gatherC:
		case <-probeC:
			probe, probeC = nil, nil
			if err := e.drain(); err != nil {
				e.log.Debug("the database still cannot take the spooled events", zap.Error(err))
				backoff = min(2*backoff, probeMax)
			} else {
				backoff = probeMin
			}
		}
		if gather != nil {
			gather.Stop()
			gather, gatherC = nil, nil
		}
		last = time.Now()
		if e.flush() && probeC == nil {
			schedule(backoff)
		}
	}
}

// flushWanted reports whether a Flush waits.
func (e *events) flushWanted() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wanted
}

// flush moves what is queued to the database, or behind the spool while the
// spool holds records; it reports whether the spool holds records. The last
// batch a Flush waits for is committed synchronously, which flushes every
// batch before it; with none left to insert, the writer's row is.
func (e *events) flush() (spooling bool) {
	for {
		batch, wanted := e.take(eventsBatchMax)
		if len(batch) == 0 {
			e.flushInserted(wanted)
			return e.sp.pending()
		}
		if !e.sp.pending() {
			flushed, err := e.insert(batch, wanted)
			if err == nil {
				if flushed {
					e.unflushed = nil
					e.settle(e.handled)
				} else {
					e.unflushed = append(e.unflushed, insertedBatch{recs: batch, mark: e.marks.note(), end: e.handled})
					e.flushInserted(wanted)
				}
				continue
			}
			e.log.Warn("the database cannot take audit events; they are spooled until it can", zap.Error(err))
			e.spoolUnflushed()
		}
		e.toSpool(batch)
		e.settle(e.handled)
	}
}

// flushInserted settles the inserted batches a synchronous commit has
// covered since and, when force is set, flushes the others: with its own
// synchronous commit or, if the database cannot be reached, by writing
// them to the spool, to be sent again.
func (e *events) flushInserted(force bool) {
	k := 0
	for k < len(e.unflushed) && e.marks.covered(e.unflushed[k].mark) {
		k++
	}
	if k > 0 {
		e.settle(e.unflushed[k-1].end)
		e.unflushed = append(e.unflushed[:0], e.unflushed[k:]...)
	}
	if !force {
		if len(e.unflushed) == 0 {
			e.settle(e.handled) // nothing inserted waits: what was taken is spooled or refused
		}
		return
	}
	if len(e.unflushed) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), e.bound)
		err := e.marks.flush(ctx)
		cancel()
		if err != nil {
			e.log.Warn("the database cannot flush the audit events it took; they are spooled and sent again", zap.Error(err))
			e.spoolUnflushed()
		}
		e.unflushed = nil
	}
	e.settle(e.handled)
}

// spoolUnflushed writes the inserted batches not known flushed to the spool
// (a database crash may have taken them): they are sent again, in order,
// and the insert skips those it has.
func (e *events) spoolUnflushed() {
	for _, b := range e.unflushed {
		e.toSpool(b.recs)
	}
	e.unflushed = nil
}

func (e *events) toSpool(batch []store.EventRecord) {
	n, err := e.sp.append(batch)
	e.spooled.Add(uint64(n))
	e.spoolBytes.Store(e.sp.size)
	switch {
	case err != nil:
		e.countDrop(len(batch), err.Error())
	case n < len(batch):
		e.countDrop(len(batch)-n, fmt.Sprintf("the event spool is full (%d bytes, the bound)", e.sp.max))
	}
}

// drain writes the spool out, in order, and empties it. It stops early when
// the store closes: what is left is written at the next start.
func (e *events) drain() error {
	for e.sp.pending() {
		select {
		case <-e.stop:
			return errClosing
		default:
		}
		recs, end, bad, err := e.sp.next(eventsBatchMax)
		if err != nil {
			return err
		}
		if bad > 0 {
			e.countDrop(bad, "a spooled line could not be read")
		}
		if len(recs) > 0 {
			if _, err := e.insert(recs, true); err != nil {
				return err
			}
		}
		err = e.sp.advance(end)
		e.spoolBytes.Store(e.sp.size)
		if err != nil {
			return err
		}
	}
	return nil
}

// insert writes recs in one transaction, committed synchronously when wait
// is set; flushed says that commit changed rows, so it waited for the
// flush of everything before it. A batch the database rejects for one bad
// record is written record by record (not waited for), the rejected ones
// counted.
func (e *events) insert(recs []store.EventRecord, wait bool) (flushed bool, err error) {
	if e.beforeInsert != nil {
		e.beforeInsert(recs)
	}
	wrote, err := e.insertBatch(recs, wait)
	if err == nil && e.afterInsert != nil {
		err = e.afterInsert()
	}
	if err == nil {
		e.batches.Add(1)
		e.written.Add(uint64(len(recs)))
		return wrote && wait, nil
	}
	if !rejected(err) {
		return false, unavailable(err)
	}
	for i := range recs {
		_, err := e.insertBatch(recs[i:i+1], false)
		switch {
		case err == nil:
			e.written.Add(1)
		case rejected(err):
			e.countDrop(1, "the database rejected an event: "+err.Error())
		default:
			return false, unavailable(err)
		}
	}
	e.batches.Add(1)
	return false, nil
}

// rejected says err is the database refusing a value, not failing to answer.
func rejected(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

const insertEvents = `
	INSERT INTO car_events (node, seq, at, kind, proposal_id, hash, prev_hash, body)
	SELECT node, seq, at, kind, proposal_id, hash, prev_hash, body::json
	FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
	     WITH ORDINALITY AS r(node, seq, at, kind, proposal_id, hash, prev_hash, body, ord)
	ORDER BY ord
	ON CONFLICT (node, seq) DO NOTHING`

func (e *events) insertBatch(recs []store.EventRecord, wait bool) (wrote bool, err error) {
	n := len(recs)
	nodes, kinds, props, hashes, prevs, bodies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, ats := make([]int64, n), make([]time.Time, n)
	for i := range recs {
		r := &recs[i]
		nodes[i], seqs[i], ats[i], kinds[i], props[i], hashes[i], prevs[i], bodies[i] =
			r.Node, int64(r.Seq), r.At, r.Kind, r.ProposalID, r.Hash, r.PrevHash, string(r.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.bound)
	defer cancel()
	// One round trip, one implicit transaction: the lock, the insert, and
	// the announcement on store.TopicEvents that wakes the other daemons'
	// followers (sent when the transaction commits, so never before the
	// records can be read).
	b := &pgx.Batch{}
	if wait {
		b.Queue(`SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off'`)
	} else {
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(eventsLockID))
	b.Queue(insertEvents, nodes, seqs, ats, kinds, props, hashes, prevs, bodies)
	b.Queue(`SELECT pg_notify($1, $2)`, channelOf(store.TopicEvents), e.node)
	var m uint64
	if e.marks != nil {
		m = e.marks.before()
	}
	br := e.pool.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	// Only a transaction that changed a row waits for its flush: one whose
	// records were all there already (a batch sent again) did not.
	wrote = tag.RowsAffected() > 0
	if wait && wrote && e.marks != nil {
		e.marks.synced(m)
	}
	return wrote, nil
}

const eventColumns = `id, node, seq, at, kind, proposal_id, hash, prev_hash, body::text`

func scanEvent(row pgx.CollectableRow) (store.EventRecord, error) {
	var r store.EventRecord
	var seq int64
	var body string
	err := row.Scan(&r.Pos, &r.Node, &seq, &r.At, &r.Kind, &r.ProposalID, &r.Hash, &r.PrevHash, &body)
	r.Seq, r.Body, r.At = uint64(seq), json.RawMessage(body), r.At.UTC()
	return r, err
}

// Since returns up to limit records (at most 10000) positioned after cursor,
// of every daemon but skip, and the cursor to read on from. Records still
// queued or spooled are not in it yet. One statement, so one snapshot,
// reads the page and the newest position: when the page is not full, every
// record up to that position that is not skipped is in it (positions
// become visible in order), and the cursor moves past the skipped ones too.
func (e *events) Since(ctx context.Context, cursor int64, limit int, skip string) ([]store.EventRecord, int64, error) {
	if limit <= 0 || limit > eventsQueryMx {
		limit = eventsQueryMx
	}
	// The last row is the newest position, marked by an empty node (every
	// record names its daemon).
	rows, err := e.pool.Query(ctx, `(SELECT `+eventColumns+` FROM car_events WHERE id > $1 AND node <> $3 ORDER BY id LIMIT $2)
		UNION ALL SELECT coalesce(max(id), $1), '', 0, now(), '', '', '', '', '' FROM car_events WHERE id > $1`, cursor, limit, skip)
	if err != nil {
		return nil, cursor, fmt.Errorf("read the event log after position %d: %w", cursor, unavailable(err))
	}
	recs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, cursor, fmt.Errorf("read the event log after position %d: %w", cursor, unavailable(err))
	}
	head := cursor
	page := recs[:0]
	for _, r := range recs {
		if r.Node == "" {
			head = max(head, r.Pos)
			continue
		}
		page = append(page, r)
	}
	if len(page) == limit {
		return page, page[len(page)-1].Pos, nil
	}
	return page, head, nil
}

// Query returns the newest records matching q (q.Limit of them, at most
// 10000), oldest first. Since is inclusive, Until exclusive.
func (e *events) Query(ctx context.Context, q store.EventFilter) ([]store.EventRecord, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(q.Kinds) > 0 {
		where = append(where, "kind = ANY("+arg(q.Kinds)+")")
	}
	if q.ProposalID != "" {
		where = append(where, "proposal_id = "+arg(q.ProposalID))
	}
	if q.Node != "" {
		where = append(where, "node = "+arg(q.Node))
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= "+arg(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "at < "+arg(q.Until))
	}
	limit := q.Limit
	if limit <= 0 || limit > eventsQueryMx {
		limit = eventsQueryMx
	}
	sql := `SELECT ` + eventColumns + ` FROM car_events`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql = `SELECT * FROM (` + sql + ` ORDER BY id DESC LIMIT ` + arg(limit) + `) newest ORDER BY id`
	rows, err := e.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("query the event log: %w", unavailable(err))
	}
	recs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("query the event log: %w", unavailable(err))
	}
	return recs, nil
}

// Count is the number of records in the database (not those still queued
// or spooled).
func (e *events) Count(ctx context.Context) (int, error) {
	var n int64
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM car_events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the event log: %w", unavailable(err))
	}
	return int(n), nil
}

// LastOf returns node's newest seq and hash in the database or, for this
// daemon, among its records still queued or spooled if newer.
func (e *events) LastOf(ctx context.Context, node string) (uint64, string, error) {
	var seq int64
	var hash string
	err := e.pool.QueryRow(ctx, `SELECT seq, hash FROM car_events WHERE node = $1 ORDER BY seq DESC LIMIT 1`, node).Scan(&seq, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, "", fmt.Errorf("read the end of daemon '%s''s event chain: %w", node, unavailable(err))
	}
	if node == e.node {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.lastSeq > uint64(seq) {
			return e.lastSeq, e.lastHash, nil
		}
	}
	return uint64(seq), hash, nil
}

// Head is the position of the newest record in the database (0 for an
// empty log): Since(Head) returns what is written afterwards.
func (e *events) Head(ctx context.Context) (int64, error) {
	var head int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM car_events`).Scan(&head); err != nil {
		return 0, fmt.Errorf("read the head of the event log: %w", unavailable(err))
	}
	return head, nil
}
