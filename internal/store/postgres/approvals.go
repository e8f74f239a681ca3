package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/approvals"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The approval ledger: one row per fingerprint in car_approvals (the
// current decision, stamped with a seq from car_approval_seq that grows with
// every decision in commit order per fingerprint) and every decision in
// car_approval_history.
//
// Each daemon keeps a read cache of the whole ledger, so Decision and List
// never wait on the database. The cache takes a row only when its seq is
// newer than what it holds, and wakes the fingerprint's watchers when it
// does. It is fed by
//   - Record on this daemon, after the commit;
//   - the notification every Record sends in its transaction ("seq:fp" on
//     the approvals topic), on every daemon: the row is re-read unless the
//     cache already holds that seq;
//   - a full reload whenever the bus resyncs (at start, after it lost its
//     connection, after it dropped notifications), and
//   - a periodic re-check (RecheckInterval): the sum of all seqs, compared
//     with the cache's, reveals any missed change, which then reloads.
//     So a lost notification cannot strand a parked action.
const approvalsTopic = "approvals"

// ledger is the store.Approvals of one daemon.
type ledger struct {
	pool    *pgxpool.Pool
	node    string
	timeout time.Duration

	mu       sync.Mutex
	recs     map[string]cachedRecord
	sum      big.Int // of the seqs in recs
	watchers store.ApprovalWatchers

	unsubscribe func()
	listening   chan struct{} // closed at the bus's first resync
	once        sync.Once
	stop        context.CancelFunc
	done        chan struct{} // closed when the re-check has returned
}

type cachedRecord struct {
	rec protocol.ApprovalRecord
	seq int64
}

// openLedger loads the ledger, subscribes to its notifications and waits
// (within ctx and timeout) until they are listened to, then starts the
// re-check.
func openLedger(ctx context.Context, pool *pgxpool.Pool, b *bus, node string, timeout, recheck time.Duration) (*ledger, error) {
	l := &ledger{
		pool: pool, node: node, timeout: timeout,
		recs:      make(map[string]cachedRecord),
		listening: make(chan struct{}),
		done:      make(chan struct{}),
	}
	if err := l.reload(ctx); err != nil {
		return nil, err
	}
	l.unsubscribe = b.Subscribe(approvalsTopic, l.notified)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-l.listening:
	case <-wctx.Done():
		l.unsubscribe()
		return nil, fmt.Errorf("listen for approval notifications: %w", unavailable(wctx.Err()))
	}
	rctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go every(rctx, recheck, l.done, func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		_ = l.check(cctx) // an outage: the next tick retries
		cancel()
	})
	return l, nil
}

// close stops the re-check and the subscription.
func (l *ledger) close() {
	l.unsubscribe()
	l.stop()
	<-l.done
}

// Record commits a decision (the row, its history and the notification in
// one transaction), then puts it in the cache and wakes local watchers.
func (l *ledger) Record(r protocol.ApprovalRecord) (protocol.ApprovalRecord, error) {
	if err := approvals.CheckDecision(r.Decision); err != nil {
		return r, err
	}
	r.RecordedAt = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("encode the decision on %s: %w", r.Fingerprint, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	var seq int64
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO car_approvals (fingerprint, record, recorded_at, node, seq)
			VALUES ($1, $2, $3, $4, nextval('car_approval_seq'))
			ON CONFLICT (fingerprint) DO UPDATE SET record = EXCLUDED.record, recorded_at = EXCLUDED.recorded_at,
				node = EXCLUDED.node, seq = nextval('car_approval_seq')
			RETURNING seq`, r.Fingerprint, string(b), r.RecordedAt, l.node).Scan(&seq)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO car_approval_history (fingerprint, record, recorded_at, node) VALUES ($1, $2, $3, $4)`,
			r.Fingerprint, string(b), r.RecordedAt, l.node); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", channelOf(approvalsTopic), notice(seq, r.Fingerprint))
		return err
	})
	if err != nil {
		return r, fmt.Errorf("record the decision on %s: %w", r.Fingerprint, unavailable(err))
	}
	var stored protocol.ApprovalRecord
	if err := json.Unmarshal(b, &stored); err == nil {
		l.apply(r.Fingerprint, stored, seq)
	}
	return r, nil
}

// notice is a notification's payload: the seq, and the fingerprint when it
// fits (else subscribers re-check the whole ledger).
func notice(seq int64, fingerprint string) string {
	s := strconv.FormatInt(seq, 10) + ":"
	if checkPayload(approvalsTopic, []byte(s+fingerprint)) == nil {
		s += fingerprint
	}
	return s
}

// notified handles the bus: a resync reloads, a notice re-reads its row.
func (l *ledger) notified(payload []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if payload == nil {
		// Errors are left to the re-check, which retries.
		_ = l.reload(ctx)
		l.once.Do(func() { close(l.listening) })
		return
	}
	seqText, fp, _ := strings.Cut(string(payload), ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || fp == "" {
		_ = l.check(ctx)
		return
	}
	l.mu.Lock()
	held := l.recs[fp].seq
	l.mu.Unlock()
	if held >= seq {
		return // this daemon recorded it, or already read it
	}
	_ = l.readRow(ctx, fp)
}

// check reloads the ledger when the database's sum of seqs differs from
// the cache's: seqs only grow, so any change the cache missed shows.
func (l *ledger) check(ctx context.Context) error {
	var text string
	if err := l.pool.QueryRow(ctx, "SELECT coalesce(sum(seq), 0)::text FROM car_approvals").Scan(&text); err != nil {
		return unavailable(err)
	}
	l.mu.Lock()
	same := l.sum.String() == text
	l.mu.Unlock()
	if same {
		return nil
	}
	return l.reload(ctx)
}

// reload reads every row into the cache.
func (l *ledger) reload(ctx context.Context) error {
	return l.readRows(ctx, "load the approval ledger", "SELECT fingerprint, record::text, seq FROM car_approvals")
}

// readRows reads the rows query selects (fingerprint, record, seq) into the
// cache; a record that does not decode is left out. doing names the work
// in an error.
func (l *ledger) readRows(ctx context.Context, doing, query string, args ...any) error {
	rows, err := l.pool.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", doing, unavailable(err))
	}
	type row struct {
		fp  string
		rec protocol.ApprovalRecord
		seq int64
	}
	var all []row
	for rows.Next() {
		var fp, text string
		var seq int64
		if err := rows.Scan(&fp, &text, &seq); err != nil {
			rows.Close()
			return fmt.Errorf("%s: %w", doing, unavailable(err))
		}
		var rec protocol.ApprovalRecord
		if json.Unmarshal([]byte(text), &rec) == nil {
			all = append(all, row{fp, rec, seq})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", doing, unavailable(err))
	}
	for _, r := range all {
		l.apply(r.fp, r.rec, r.seq)
	}
	return nil
}

// readRow reads one fingerprint's row into the cache.
func (l *ledger) readRow(ctx context.Context, fp string) error {
	var text string
	var seq int64
	err := l.pool.QueryRow(ctx, "SELECT record::text, seq FROM car_approvals WHERE fingerprint = $1", fp).Scan(&text, &seq)
	if err != nil {
		return fmt.Errorf("read the decision on %s: %w", fp, unavailable(err))
	}
	var rec protocol.ApprovalRecord
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		return fmt.Errorf("the stored decision on %s is not a valid record: %w", fp, err)
	}
	l.apply(fp, rec, seq)
	return nil
}

// Refresh reads the rows of fingerprints into the cache, in one statement.
func (l *ledger) Refresh(ctx context.Context, fingerprints ...string) error {
	if len(fingerprints) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.readRows(ctx, fmt.Sprintf("read the decisions on %d fingerprint(s)", len(fingerprints)),
		"SELECT fingerprint, record::text, seq FROM car_approvals WHERE fingerprint = ANY($1)", fingerprints)
}

// apply puts a row in the cache when it is newer than the cache's, and
// then hands it to the fingerprint's watchers; each gets one decision.
func (l *ledger) apply(fp string, rec protocol.ApprovalRecord, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.recs[fp]
	if ok && cur.seq >= seq {
		return
	}
	l.sum.Add(&l.sum, big.NewInt(seq-cur.seq))
	l.recs[fp] = cachedRecord{rec: rec, seq: seq}
	l.watchers.Wake(rec)
}

// Decision returns the last decision for a fingerprint, from the cache.
func (l *ledger) Decision(fingerprint string) (protocol.ApprovalRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.recs[fingerprint]
	return c.rec, ok
}

// List returns the current decision of every fingerprint, newest first,
// from the cache.
func (l *ledger) List() []protocol.ApprovalRecord {
	l.mu.Lock()
	out := make([]protocol.ApprovalRecord, 0, len(l.recs))
	for _, c := range l.recs {
		out = append(out, c.rec)
	}
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].RecordedAt.After(out[j].RecordedAt) })
	return out
}

// Watch returns a channel that receives the next decision for fingerprint
// that reaches this daemon's cache after the call (recorded here or on any
// other daemon), and a function that stops watching. Watch first, then
// read Decision, so nothing is missed.
func (l *ledger) Watch(fingerprint string) (<-chan protocol.ApprovalRecord, func()) {
	return l.watchers.Watch(fingerprint)
}

// Use takes one use of fingerprint's approval (store.Approvals). An
// approval the cache holds as unlimited and live is taken from the cache,
// as Decision is; one that counts its uses is counted in the
// database, under its row's lock, so two daemons cannot both spend the
// last use.
func (l *ledger) Use(ctx context.Context, fingerprint string, now time.Time) (protocol.ApprovalRecord, bool, error) {
	if r, ok := l.Decision(fingerprint); ok && r.Decision == approvals.Approved && r.Uses == 0 && approvals.Live(r, now) {
		return r, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var rec protocol.ApprovalRecord
	var seq int64
	used := false
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		used = false
		var text string
		err := tx.QueryRow(ctx, "SELECT record::text, seq FROM car_approvals WHERE fingerprint = $1 FOR UPDATE", fingerprint).Scan(&text, &seq)
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		rec = protocol.ApprovalRecord{}
		if err := json.Unmarshal([]byte(text), &rec); err != nil {
			return fmt.Errorf("the stored decision on %s is not a valid record: %w", fingerprint, err)
		}
		if rec.Decision != approvals.Approved || !approvals.Live(rec, now) {
			return nil
		}
		used = true
		if rec.Uses == 0 {
			return nil
		}
		rec.Used++
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "UPDATE car_approvals SET record = $2, node = $3, seq = nextval('car_approval_seq') WHERE fingerprint = $1 RETURNING seq",
			fingerprint, string(b), l.node).Scan(&seq); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", channelOf(approvalsTopic), notice(seq, fingerprint))
		return err
	})
	if err != nil {
		return rec, false, fmt.Errorf("use the approval on %s: %w", fingerprint, unavailable(err))
	}
	if seq != 0 {
		l.apply(fingerprint, rec, seq)
	}
	return rec, used, nil
}
