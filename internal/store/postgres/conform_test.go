package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/store/storetest"
)

// TestConformance runs the store suite against PostgreSQL: one database,
// its tables emptied for every backing the suite asks for (a database each
// would take about a second to create), and every daemon of a test a member
// of it.
func TestConformance(t *testing.T) { conform(t, SyncFull) }

// TestConformanceJournalSyncProposal runs the suite again with results
// committed without waiting for their flush, flushed once per proposal
// (journal_sync = proposal): what the store answers is the same.
func TestConformanceJournalSyncProposal(t *testing.T) { conform(t, SyncProposal) }

func conform(t *testing.T, mode string) {
	url := pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) func(*testing.T, string) *store.Store {
		emptyTables(t, url)
		return func(t *testing.T, node string) *store.Store {
			db, err := Open(ctxT(t), Config{URL: url, Node: node, Version: "test", JournalSync: mode})
			if err != nil {
				t.Fatalf("open member %s: %v", node, err)
			}
			return db.Store()
		}
	}, storetest.Options{Shared: true, LapseClaim: func(t *testing.T, holder *store.Store, key string) {
		lapseClaim(t, url, holder, key)
	}})
}

// lapseClaim stops holder renewing its claims, waits out a renewal in
// flight, and moves key's lease into the past: holder has stalled past it.
func lapseClaim(t *testing.T, url string, holder *store.Store, key string) {
	t.Helper()
	idem, ok := holder.Idempotency.(*idempotency)
	if !ok {
		t.Fatalf("the store's idempotency cache is a %T, not PostgreSQL's", holder.Idempotency)
	}
	idem.renewing.Lock() // a renewal in flight ends first
	idem.noRenew.Store(true)
	idem.renewing.Unlock()
	// The holder stalled: its lease was set longer ago than its term, so
	// its Commit (under journal_sync = proposal too) is made in place.
	idem.mu.Lock()
	for _, c := range idem.held {
		if c.key == key {
			c.leased.Store(0)
		}
	}
	idem.mu.Unlock()
	tag, err := sqlConn(t, url).Exec(ctxT(t), `UPDATE car_idempotency SET lease_until = now() - interval '1 millisecond' WHERE key = $1 AND token IS NOT NULL AND NOT done`, key)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lapse the claim of %s: %v (%d rows)", key, err, tag.RowsAffected())
	}
}

// emptyTables empties the store's tables at url, once migrated; the schema
// and its version stay.
func emptyTables(t *testing.T, url string) {
	t.Helper()
	conn := sqlConn(t, url)
	rows, err := conn.Query(ctxT(t), `SELECT tablename FROM pg_tables
		WHERE schemaname = current_schema() AND tablename LIKE 'car\_%' AND tablename <> 'car_schema_version'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		return // not migrated yet: nothing to empty
	}
	if _, err := conn.Exec(ctxT(t), "TRUNCATE "+strings.Join(tables, ", ")); err != nil {
		t.Fatalf("empty the store's tables: %v", err)
	}
}
