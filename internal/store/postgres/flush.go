package postgres

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Commits not waited for, and the flushes that cover them.
//
// A commit made with synchronous_commit off returns once its commit record
// is in the WAL and the transaction is visible to every session, before
// the record is on disk. PostgreSQL flushes its WAL in order, so a later
// synchronous commit, once it returns, has flushed every record before its
// own: every commit that returned before that commit's record was written.
// A transaction that writes nothing (no row changed) writes no commit
// record and waits for no flush, so only a commit that changed a row
// counts as one that flushed.
//
// walMarks orders the two on this daemon: each commit not waited for (and
// each result read that may be another daemon's commit not yet flushed)
// takes the next mark once it returned; a synchronous commit notes the
// newest mark before it is sent, and once it returns every mark up to that
// one is flushed.
type walMarks struct {
	noted   atomic.Uint64 // marks taken
	flushed atomic.Uint64 // every mark up to this one is on disk

	pool *pgxpool.Pool
	node string
	mu   sync.Mutex // one flush statement at a time: a flush waited for covers the ones queued behind it
	// flushes counts the flush statements sent (a test's view of the
	// mechanism; the property is checked on the database's LSNs).
	flushes atomic.Uint64
}

// note takes the next mark, for a commit not waited for that returned (or
// a result read that may be one): it is flushed once covered.
func (w *walMarks) note() uint64 { return w.noted.Add(1) }

// before is what a synchronous commit about to be sent will cover.
func (w *walMarks) before() uint64 { return w.noted.Load() }

// synced records that a synchronous commit that changed a row returned;
// m is what before returned before it was sent.
func (w *walMarks) synced(m uint64) {
	for {
		f := w.flushed.Load()
		if f >= m || w.flushed.CompareAndSwap(f, m) {
			return
		}
	}
}

// covered reports whether mark m is known flushed.
func (w *walMarks) covered(m uint64) bool { return w.flushed.Load() >= m }

// flush returns once every mark taken before the call is flushed: at once
// when a synchronous commit since covered them, else after one synchronous
// commit of this daemon's car_flush row (which changes a row, so its
// commit waits for the flush). Concurrent callers share one statement.
func (w *walMarks) flush(ctx context.Context) error {
	target := w.noted.Load()
	if w.covered(target) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.covered(target) {
		return nil // flushed by the statement this call waited behind
	}
	m := w.before()
	w.flushes.Add(1)
	// One round trip, one transaction: a server whose synchronous_commit
	// is off commits this one synchronously all the same.
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off'`)
	b.Queue(`
		INSERT INTO car_flush (node, flushes) VALUES ($1, 1)
		ON CONFLICT (node) DO UPDATE SET flushes = car_flush.flushes + 1`, w.node)
	if err := w.pool.SendBatch(ctx, b).Close(); err != nil {
		return unavailable(err)
	}
	w.synced(m)
	return nil
}
