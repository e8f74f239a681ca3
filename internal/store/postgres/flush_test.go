package postgres

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
)

// insertLSN is the end of the WAL written so far: past the commit record
// of every transaction that returned before it is read.
func insertLSN(t *testing.T, db *DB) string {
	t.Helper()
	var lsn string
	if err := db.pool.QueryRow(ctxT(t), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// flushedPast reports whether the WAL is flushed up to lsn.
func flushedPast(t *testing.T, db *DB, lsn string) bool {
	t.Helper()
	var ok bool
	if err := db.pool.QueryRow(ctxT(t), `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, lsn).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// storeResult claims key on db and commits out as its result.
func storeResult(t *testing.T, db *DB, key string, out any) {
	t.Helper()
	_, hit, c, err := db.idem.Begin(ctxT(t), key, "fetch", "p-"+key)
	if err != nil || hit {
		t.Fatalf("Begin %s: hit %v, %v", key, hit, err)
	}
	if err := c.Commit(ctxT(t), out); err != nil {
		t.Fatalf("Commit %s: %v", key, err)
	}
}

// Under journal_sync = proposal a result's commit does not wait for its
// flush; Flush, before the proposal's reply, flushes the WAL past it, and
// past a result another daemon committed the same way that this one was
// answered from (PostgreSQL flushes its WAL in order).
func TestProposalSyncFlushCoversTheResults(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	proposal := func(c *Config) { c.JournalSync = SyncProposal }
	a, b := openNode(t, url, "a", proposal), openNode(t, url, "b", proposal)

	before := a.marks.flushes.Load()
	storeResult(t, a, "k1", "one")
	// Result waits for this daemon's own result sent ahead.
	if out, ok, err := a.idem.Result(ctxT(t), "k1"); err != nil || !ok || out != "one" {
		t.Fatalf("Result k1 = %v, %v, %v", out, ok, err)
	}
	lsn := insertLSN(t, a)
	if n := a.marks.flushes.Load(); n != before {
		t.Fatalf("the Commit sent %d flushes; under proposal it waits for none", n-before)
	}
	if err := a.idem.Flush(ctxT(t), "p-k1"); err != nil {
		t.Fatal(err)
	}
	if !flushedPast(t, a, lsn) {
		t.Fatalf("after Flush the WAL is not flushed past the result's commit (%s)", lsn)
	}
	if n := a.marks.flushes.Load(); n != before+1 {
		t.Fatalf("Flush sent %d flush statements, want 1", n-before)
	}
	// Nothing committed or read since: nothing to flush.
	if err := a.idem.Flush(ctxT(t), "p"); err != nil || a.marks.flushes.Load() != before+1 {
		t.Fatalf("a second Flush with nothing new: %v, %d statements in all", err, a.marks.flushes.Load()-before)
	}

	// Another daemon's result, committed without waiting, answers a: a's
	// Flush covers it.
	storeResult(t, b, "k2", "two")
	out, hit, _, err := a.idem.Begin(ctxT(t), "k2", "fetch", "p-other")
	if err != nil || !hit || out != "two" {
		t.Fatalf("Begin k2 on a = %v, hit %v, %v; want b's result", out, hit, err)
	}
	lsn = insertLSN(t, a) // past b's commit, which a read
	if err := a.idem.Flush(ctxT(t), "p"); err != nil {
		t.Fatal(err)
	}
	if !flushedPast(t, a, lsn) {
		t.Fatalf("after a's Flush the WAL is not flushed past b's result's commit (%s)", lsn)
	}
	if n := a.marks.flushes.Load(); n != before+2 {
		t.Fatalf("a's Flush after a hit sent %d flush statements in all, want 2", n-before)
	}
}

// Under journal_sync = full the result's commit waits for its flush, so
// the reply's Flush has nothing to do.
func TestFullSyncCommitIsTheFlush(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a")
	before := a.marks.flushes.Load()
	storeResult(t, a, "k1", "one")
	if err := a.idem.Flush(ctxT(t), "p-k1"); err != nil {
		t.Fatal(err)
	}
	if n := a.marks.flushes.Load(); n != before {
		t.Fatalf("Flush after a synchronous Commit sent %d flush statements, want none", n-before)
	}
}

// Under full, a database whose own synchronous_commit is off still has
// each result's commit written out before Commit returns: the results
// survive a crash of the database (an immediate stop) that follows at once.
func TestFullSyncCommitSurvivesACrashWhereTheDatabaseSaysOff(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := conn.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctxT(t))
	a := openNode(t, url, "a", func(c *Config) { c.ConnectTimeout = time.Second })
	var setting string
	if err := a.pool.QueryRow(ctxT(t), `SELECT current_setting('synchronous_commit')`).Scan(&setting); err != nil || setting != "off" {
		t.Fatalf("the database's synchronous_commit is %q (%v), want off", setting, err)
	}
	for i := range 5 {
		storeResult(t, a, fmt.Sprintf("k%d", i), "one")
	}
	srv.Stop(t)
	srv.Start(t)
	a2 := openNode(t, url, "a2")
	for i := range 5 {
		if out, ok, err := a2.idem.Result(ctxT(t), fmt.Sprintf("k%d", i)); err != nil || !ok || out != "one" {
			t.Fatalf("after the crash, k%d's result = %v, %v, %v; want the committed result", i, out, ok, err)
		}
	}
}

// A result flushed by Flush survives a crash of the database (an
// immediate stop: what is not written out is lost).
func TestProposalSyncFlushedResultSurvivesADatabaseCrash(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	a := openNode(t, url, "a", func(c *Config) { c.JournalSync = SyncProposal; c.ConnectTimeout = time.Second })
	storeResult(t, a, "k1", "one")
	if err := a.idem.Flush(ctxT(t), "p-k1"); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	srv.Start(t)
	a2 := openNode(t, url, "a2", func(c *Config) { c.JournalSync = SyncProposal })
	out, ok, err := a2.idem.Result(ctxT(t), "k1")
	if err != nil || !ok || out != "one" {
		t.Fatalf("after the crash, k1's result = %v, %v, %v; want the flushed result", out, ok, err)
	}
}

// The event log's Flush returns once what was appended before it is in
// the database and flushed: the last batch committed synchronously, or,
// with everything inserted already, the writer's flush statement.
func TestEventsFlushCoversWhatWasAppended(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a", func(c *Config) { c.eventsFlushEvery = time.Hour })
	c := &chain{node: "a"}
	c.append(a, 10)
	testwait.Eventually(t, eventualLimit, "10 inserted", func() bool { return a.EventStats().Written == 10 })
	lsn := insertLSN(t, a)
	before := a.marks.flushes.Load()
	if err := a.events.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !flushedPast(t, a, lsn) {
		t.Fatalf("after Flush the WAL is not flushed past the inserted batch (%s)", lsn)
	}
	if n := a.marks.flushes.Load(); n != before+1 {
		t.Fatalf("Flush of inserted batches sent %d flush statements, want 1", n-before)
	}
	c.append(a, 3)
	if err := a.events.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, a); n != 13 {
		t.Fatalf("%d records in the database after the second Flush, want 13", n)
	}
}

// Batches inserted without waiting for their flush and not known flushed
// when the database goes are spooled again, and sent again once it is
// back: a database crash that took them leaves no gap in the chain.
func TestEventsNotFlushedAreSentAgain(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	spool := filepath.Join(t.TempDir(), "events-spool.jsonl")
	a := openNode(t, url, "a", func(c *Config) { c.SpoolPath = spool; c.ConnectTimeout = time.Second; c.eventsFlushEvery = time.Hour })
	c := &chain{node: "a"}
	c.append(a, 10)
	testwait.Eventually(t, eventualLimit, "10 inserted", func() bool { return a.EventStats().Written == 10 })
	srv.Stop(t)
	c.append(a, 5)
	testwait.Eventually(t, eventualLimit, "15 records spooled", func() bool { return a.EventStats().Spooled == 15 })
	if lines := spoolLines(t, spool); lines != 15 {
		t.Fatalf("the spool holds %d lines, want the 10 not known flushed and the 5 after them", lines)
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "all 15 in the database", func() bool {
		n, err := a.events.Count(ctxT(t))
		return err == nil && n == 15
	})
	if got := seqsByPos(t, a); strings.Join(got, ",") != strings.Join(wantSeqs("a", 1, 15), ",") {
		t.Fatalf("positions do not follow the node's seq: %v", got)
	}
	if st := a.EventStats(); st.Dropped != 0 {
		t.Fatalf("events dropped: %+v", st)
	}
}

// Two runs that share a proposal id (ids come from clients) each get
// their own updates' answers: the run whose update stored nothing is told
// so at its Flush, and the other run's Flush, even the first, is clean.
func TestProposalSyncFlushIsPerRunNotPerProposalID(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a", func(c *Config) { c.JournalSync = SyncProposal })
	run1, run2 := store.WithRun(ctxT(t), 1), store.WithRun(ctxT(t), 2)
	_, hit, c1, err := a.idem.Begin(run1, "k1", "fetch", "p1")
	if err != nil || hit {
		t.Fatalf("Begin k1: hit %v, %v", hit, err)
	}
	_, hit, c2, err := a.idem.Begin(run2, "k2", "fetch", "p1")
	if err != nil || hit {
		t.Fatalf("Begin k2: hit %v, %v", hit, err)
	}
	if err := a.idem.Invalidate(run1, []string{"k1"}, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c1.Commit(run1, "one"); err != nil {
		t.Fatal(err)
	}
	if err := c2.Commit(run2, "two"); err != nil {
		t.Fatal(err)
	}
	if err := a.idem.Flush(run2, "p1"); err != nil {
		t.Fatalf("Flush of the run whose update was stored = %v; want nil", err)
	}
	if err := a.idem.Flush(run1, "p1"); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("Flush of the run whose update stored nothing = %v; want ErrClaimLost", err)
	}
}

// Under journal_sync = proposal a Commit whose lease is well within its
// term returns once the update is sent; an update that then stores
// nothing (here the claim was invalidated meanwhile) is the error of the
// proposal's Flush, so its reply acknowledges nothing.
func TestProposalSyncFlushReportsAResultNotStored(t *testing.T) {
	t.Parallel()
	a := openNode(t, pgtest.URL(t), "a", func(c *Config) { c.JournalSync = SyncProposal })
	_, hit, c, err := a.idem.Begin(ctxT(t), "k1", "fetch", "p1")
	if err != nil || hit {
		t.Fatalf("Begin k1: hit %v, %v", hit, err)
	}
	if err := a.idem.Invalidate(ctxT(t), []string{"k1"}, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctxT(t), "one"); err != nil {
		t.Fatalf("Commit sent ahead = %v; want nil (the answer is the Flush's)", err)
	}
	if err := a.idem.Flush(ctxT(t), "p1"); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("Flush of p1 = %v; want ErrClaimLost", err)
	}
	if out, ok, err := a.idem.Result(ctxT(t), "k1"); err != nil || ok {
		t.Fatalf("Result k1 = %v, %v, %v; want none", out, ok, err)
	}
	if n := a.idem.Len(); n != 0 {
		t.Fatalf("Len = %d after an update that stored nothing; want 0", n)
	}
	// The error was the proposal's: its next Flush, and another's, are clean.
	if err := a.idem.Flush(ctxT(t), "p1"); err != nil {
		t.Fatalf("a second Flush of p1 = %v", err)
	}
}

// A claim whose lease may have lapsed (set longer ago than half its term:
// its holder stalled) is committed in place, so a superseded holder learns
// it at Commit.
func TestProposalSyncStalledHolderCommitsInPlace(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	proposal := func(c *Config) { c.JournalSync = SyncProposal }
	a, b := openNode(t, url, "a", proposal), openNode(t, url, "b", proposal)
	_, _, c, err := a.idem.Begin(ctxT(t), "k1", "fetch", "p1")
	if err != nil || c == nil {
		t.Fatalf("Begin k1 on a: %v", err)
	}
	lapseClaim(t, url, a.Store(), "k1")
	_, _, taken, err := b.idem.Begin(ctxT(t), "k1", "fetch", "p2")
	if err != nil || taken == nil {
		t.Fatalf("b's take-over of k1: %v", err)
	}
	if err := c.Commit(ctxT(t), "a's"); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("the stalled holder's Commit = %v; want store.ErrSuperseded at once", err)
	}
	if err := taken.Commit(ctxT(t), "b's"); err != nil {
		t.Fatal(err)
	}
	if err := b.idem.Flush(ctxT(t), "p2"); err != nil {
		t.Fatal(err)
	}
}

var _ store.IdempotencyFlusher = (*idempotency)(nil)
