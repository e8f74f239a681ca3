package postgres

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
	"github.com/parslee-ai/car-server/internal/testwait"
	"github.com/parslee-ai/car-server/protocol"
)

func decision(fp, d, reviewer string) protocol.ApprovalRecord {
	return protocol.ApprovalRecord{Fingerprint: fp, Decision: d, RequiredTier: "full_access", Reviewer: reviewer}
}

// waitDecision receives from a watch, or fails t.
func waitDecision(t *testing.T, ch <-chan protocol.ApprovalRecord, what string) protocol.ApprovalRecord {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("no decision woke the watcher: %s", what)
		return protocol.ApprovalRecord{}
	}
}

func noDecision(t *testing.T, ch <-chan protocol.ApprovalRecord, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: the watcher woke with %+v", what, r)
	default:
	}
}

// The ledger behaves as the file ledger on one daemon: validation, the
// last decision wins, the watcher of a fingerprint wakes once at Record and
// is stopped by its stop function, the list is newest first, and every
// decision is in the history.
func TestApprovalsLedgerOnOneDaemon(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := openNode(t, url, "a")
	l := a.Store().Approvals
	if _, err := l.Record(decision("fp1", "maybe", "x")); err == nil {
		t.Fatal("an unknown decision was recorded")
	}
	ch, stop := l.Watch("fp1")
	other, stopOther := l.Watch("fp2")
	defer stopOther()
	got, err := l.Record(protocol.ApprovalRecord{Fingerprint: "fp1", Decision: "approved", RequiredTier: "full_access", Reviewer: "conn:a",
		Evidence: map[string]any{"ticket": "T-1", "n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got.RecordedAt.IsZero() {
		t.Fatal("Record did not stamp the time")
	}
	select { // woken before Record returned
	case r := <-ch:
		if r.Decision != "approved" || r.Reviewer != "conn:a" || !r.RecordedAt.Equal(got.RecordedAt) {
			t.Fatalf("woke with %+v", r)
		}
	default:
		t.Fatal("a recorded decision did not wake its watcher")
	}
	noDecision(t, other, "another fingerprint's decision")
	stop()
	if _, err := l.Record(decision("fp1", "rejected", "conn:b")); err != nil {
		t.Fatal(err)
	}
	noDecision(t, ch, "after stop")
	if _, err := l.Record(decision("fp2", "approved", "conn:c")); err != nil {
		t.Fatal(err)
	}
	r, ok := l.Decision("fp1")
	if !ok || r.Decision != "rejected" || r.Reviewer != "conn:b" {
		t.Fatalf("Decision(fp1) = %+v %v, want the later rejection", r, ok)
	}
	if _, ok := l.Decision("nope"); ok {
		t.Fatal("a decision for an unknown fingerprint")
	}
	list := l.List()
	if len(list) != 2 || list[0].Fingerprint != "fp2" || list[1].Fingerprint != "fp1" {
		t.Fatalf("List = %+v, want fp2 then fp1 (newest first)", list)
	}
	var n int
	if err := sqlConn(t, url).QueryRow(ctxT(t), "SELECT count(*) FROM car_approval_history WHERE fingerprint = 'fp1'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("history of fp1: %d rows (%v), want 2", n, err)
	}
	// What a daemon opened later loads is what was recorded.
	b := openNode(t, url, "b")
	rb, ok := b.approvals.Decision("fp1")
	if !ok || rb.Reviewer != "conn:b" || !rb.RecordedAt.Equal(r.RecordedAt) {
		t.Fatalf("a later daemon loads %+v %v, want %+v", rb, ok, r)
	}
}

// A decision recorded on daemon a releases a watcher on daemon b through
// the notification; the latency is logged.
func TestApprovalsDecisionOnOneDaemonReleasesAnother(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := openNode(t, url, "a")
	b := openNode(t, url, "b", func(c *Config) { c.ApprovalRecheck = time.Hour }) // only the notification can do it
	var lat []time.Duration
	for i := range 20 {
		fp := fmt.Sprintf("fp%d", i)
		ch, stop := b.approvals.Watch(fp)
		if _, ok := b.approvals.Decision(fp); ok {
			t.Fatal("decided before the decision")
		}
		start := time.Now()
		if _, err := a.approvals.Record(decision(fp, "approved", "conn:a")); err != nil {
			t.Fatal(err)
		}
		r := waitDecision(t, ch, "a decision on a, watched on b")
		lat = append(lat, time.Since(start))
		stop()
		if r.Fingerprint != fp || r.Decision != "approved" {
			t.Fatalf("b woke with %+v", r)
		}
		if d, ok := b.approvals.Decision(fp); !ok || d.Reviewer != "conn:a" {
			t.Fatalf("b's cache after the wake: %+v %v", d, ok)
		}
	}
	first := lat[0]
	slices.Sort(lat)
	t.Logf("Record on a to the wake on b (commit, NOTIFY, re-read), %d decisions: first %v, median %v, max %v", len(lat), first, lat[len(lat)/2], slices.Max(lat))
}

// The daemon's own notification does not wake a watcher again for a
// decision it already delivered.
func TestApprovalsOwnNotificationDoesNotWakeAgain(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	if _, err := a.approvals.Record(decision("fp1", "approved", "conn:a")); err != nil {
		t.Fatal(err)
	}
	again, stop := a.approvals.Watch("fp1")
	defer stop()
	marker, stopMarker := a.approvals.Watch("fp2")
	defer stopMarker()
	if _, err := b.approvals.Record(decision("fp2", "approved", "conn:b")); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order: fp1's was handled before fp2's.
	waitDecision(t, marker, "b's decision, seen on a")
	noDecision(t, again, "a's own notification of fp1")
}

// A notification that never comes (a row written without NOTIFY) is caught
// by the periodic re-check, which releases the watcher.
func TestApprovalsRecheckCatchesALostNotification(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	b := openNode(t, url, "b", func(c *Config) { c.ApprovalRecheck = 50 * time.Millisecond })
	ch, stop := b.approvals.Watch("lost")
	defer stop()
	insertSilently(t, url, "lost", "approved")
	r := waitDecision(t, ch, "a row inserted without a notification")
	if r.Decision != "approved" || r.Reviewer != "sql" {
		t.Fatalf("woke with %+v", r)
	}
	if d, ok := b.approvals.Decision("lost"); !ok || d.Reviewer != "sql" {
		t.Fatalf("cache after the re-check: %+v %v", d, ok)
	}
}

// Refresh reads the named rows into the cache at once, with neither a
// notification nor a re-check to bring them, and wakes their watchers; a
// fingerprint without a row stays undecided; a database that is down is
// ErrUnavailable.
func TestApprovalsRefreshReadsTheNamedRows(t *testing.T) {
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	b := openNode(t, url, "b", func(c *Config) { c.ApprovalRecheck = time.Hour })
	ch, stop := b.approvals.Watch("fresh")
	defer stop()
	insertSilently(t, url, "fresh", "approved")
	insertSilently(t, url, "other", "approved")
	if err := b.approvals.Refresh(ctxT(t), "fresh", "none"); err != nil {
		t.Fatal(err)
	}
	if d, ok := b.approvals.Decision("fresh"); !ok || d.Decision != "approved" || d.Reviewer != "sql" {
		t.Fatalf("after Refresh: %+v %v", d, ok)
	}
	if r := waitDecision(t, ch, "Refresh"); r.Reviewer != "sql" {
		t.Fatalf("woke with %+v", r)
	}
	if _, ok := b.approvals.Decision("none"); ok {
		t.Fatal("a fingerprint without a row is decided")
	}
	if _, ok := b.approvals.Decision("other"); ok {
		t.Fatal("Refresh read a row it was not asked for")
	}
	srv.Stop(t)
	if err := b.approvals.Refresh(ctxT(t), "other"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Refresh while the database is down: %v, want ErrUnavailable", err)
	}
}

// insertSilently writes a decision row behind the store's back, without a
// notification.
func insertSilently(t *testing.T, url, fp, d string) {
	t.Helper()
	rec := fmt.Sprintf(`{"fingerprint":%q,"decision":%q,"required_tier":"full_access","reviewer":"sql","recorded_at":%q}`,
		fp, d, time.Now().UTC().Format(time.RFC3339Nano))
	_, err := sqlConn(t, url).Exec(ctxT(t), `INSERT INTO car_approvals (fingerprint, record, recorded_at, node, seq)
		VALUES ($1, $2, now(), 'sql', nextval('car_approval_seq'))
		ON CONFLICT (fingerprint) DO UPDATE SET record = EXCLUDED.record, seq = nextval('car_approval_seq')`, fp, rec)
	if err != nil {
		t.Fatal(err)
	}
}

// After the database went away and came back, the cache is reloaded whole:
// a decision that landed while this daemon was not listening releases its
// watcher, with no re-check to help.
func TestApprovalsReconnectRefreshesTheCache(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	b := openNode(t, url, "b", func(c *Config) { c.ApprovalRecheck = time.Hour })
	ch, stop := b.approvals.Watch("during")
	defer stop()
	gate := make(chan struct{})
	b.bus.mu.Lock()
	b.bus.onConnect = func() { <-gate } // hold the reconnection until the row is in
	b.bus.mu.Unlock()
	srv.Stop(t)
	if _, err := b.approvals.Record(decision("x", "approved", "conn:b")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Record while the database is down: %v, want ErrUnavailable", err)
	}
	if _, ok := b.approvals.Decision("x"); ok {
		t.Fatal("a decision that did not commit is in the cache")
	}
	srv.Start(t)
	testwait.Eventually(t, eventualLimit, "the listener is connected again", func() bool {
		up, _ := b.bus.status()
		return up
	})
	insertSilently(t, url, "during", "rejected")
	noDecision(t, ch, "before the listener resumed")
	close(gate)
	r := waitDecision(t, ch, "the reload after the reconnection")
	if r.Decision != "rejected" {
		t.Fatalf("woke with %+v", r)
	}
}

// Decisions recorded at once on two daemons for one fingerprint leave both
// caches holding the row that committed last.
func TestApprovalsConcurrentDecisionsConverge(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a.approvals
			if i%2 == 1 {
				l = b.approvals
			}
			if _, err := l.Record(decision("hot", []string{"approved", "rejected"}[i%3%2], fmt.Sprintf("r%d", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var want string
	if err := sqlConn(t, url).QueryRow(ctxT(t), "SELECT record->>'reviewer' FROM car_approvals WHERE fingerprint = 'hot'").Scan(&want); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, eventualLimit, "both caches hold the last committed decision "+want, func() bool {
		ra, _ := a.approvals.Decision("hot")
		rb, _ := b.approvals.Decision("hot")
		return ra.Reviewer == want && rb.Reviewer == want
	})
}
