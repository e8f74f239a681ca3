package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// The idempotency cache with claims, shared by every daemon.
//
// A row of car_idempotency is a claim (a holder, a token naming the claim, a
// lease on the database's clock, no output), a result (done, with the output
// as the tool returned it), or free (a claim released or a result rolled
// back: no token, no output). Every row keeps its key's epoch, the fencing
// token of its last claim: a first claim takes 1, and each later one (of a
// free row, or a take-over of a lapsed claim) the next, in the statement
// that claims it, so no two claims of a key ever share an epoch. Begin claims a key with one INSERT …
// ON CONFLICT DO NOTHING and, when the key is taken, reads its row in the
// same statement:
//   - a result is a hit;
//   - a live claim (on this daemon or another) is waited for, woken by a
//     notification when it is committed or released and re-checked every
//     tenth of the lease in case a notification is lost;
//   - a claim whose lease lapsed belonged to a daemon that died, stalled or
//     lost the database for longer than the lease: one UPDATE guarded by
//     the lapsed claim's token takes it over at the next epoch, so exactly
//     one waiter wins and dispatches;
//   - a free row is claimed the same way, guarded by its having no token.
//
// Two identical idempotent calls that arrive at the same moment, on two
// daemons or on one, therefore dispatch once: the second waits for the
// first's result. The file store does not merge in-flight duplicates.
//
// A held claim's lease is renewed in the background every third of the lease
// until Commit or Release. Commit stores the output and done in one UPDATE
// guarded by the claim's token: the result is stored before the caller acks
// it. A holder whose claim was taken over meanwhile (it could not renew for a
// whole lease, so its call may now run again on the taker) gets an error from
// Commit (store.ErrSuperseded: its epoch moved) and must not ack: only the
// current holder stores a result, so exactly one result is stored and the
// one acknowledged is the one stored.
// Closing the store stops the renewals and leaves held claims to lapse, as a
// daemon that dies would: their waiters take them over after the lease.

// ErrClaimLost says a Commit found its claim gone: taken over by another
// daemon after its lease lapsed, released, or invalidated. The result was not
// stored and must not be acknowledged.
var ErrClaimLost = errors.New("the idempotency claim was lost")

// notifier is what the idempotency cache needs of the bus: a commit or a
// release publishes the key, and waiters for that key wake. store.Bus fits.
type notifier interface {
	PublishEach(ctx context.Context, topic string, payloads []string) error
	Subscribe(topic string, fn func(payload []byte)) (cancel func())
}

// idemTopic is the bus topic of idempotency keys committed or released.
const idemTopic = "idempotency"

type idempotency struct {
	pool    *pgxpool.Pool
	node    string
	lease   time.Duration
	recheck time.Duration // waiters re-read a live claim this often
	bound   time.Duration // one statement's bound when the caller gives none
	log     *zap.Logger
	bus     notifier // nil: waiters rely on the re-check alone
	unsub   func()

	incarnation string // random per process: the prefix of this daemon's tokens
	tokens      atomic.Uint64

	mu      sync.Mutex
	held    map[string]*claim                     // token → a live claim, renewed in the background
	waiters map[string]map[chan struct{}]struct{} // key → waiters to wake

	count atomic.Int64 // done rows, as last counted (Len)

	notify chan string // keys to publish, by the publisher goroutine
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	noRenew  atomic.Bool // test hook: stop renewing, as a holder that died
	renewing sync.Mutex  // held by a renewal while it runs

	// marks orders the commits not waited for (the claims; the results
	// under journal_sync = proposal; results read that another daemon may
	// not have flushed) against the synchronous ones that flush them.
	marks *walMarks
	// deferFlush (journal_sync = proposal): a result's commit does not
	// wait for its flush; Flush, before the proposal's reply, does.
	deferFlush bool

	// Results sent ahead (journal_sync = proposal): Commit returns once the
	// update is sent, and Flush waits for its answer (sentAhead).
	aheadMu   sync.Mutex
	aheadDone *sync.Cond
	ahead     map[string]int     // run (aheadRun) → its updates not answered yet
	aheadKeys map[string]int     // key → its updates not answered yet
	aheadErrs map[string][]error // run (aheadRun) → the updates that stored nothing
	noAhead   atomic.Bool        // test hook: commit every result in place
}

func newIdempotency(pool *pgxpool.Pool, cfg Config, bus notifier, marks *walMarks) *idempotency {
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &idempotency{
		pool:        pool,
		node:        cfg.Node,
		lease:       cfg.ClaimLease,
		recheck:     max(cfg.ClaimLease/10, 10*time.Millisecond),
		bound:       cfg.StatementTimeout + cfg.ConnectTimeout,
		log:         cfg.Log,
		bus:         bus,
		incarnation: hex.EncodeToString(b[:]),
		held:        make(map[string]*claim),
		waiters:     make(map[string]map[chan struct{}]struct{}),
		notify:      make(chan string, 1024),
		stop:        make(chan struct{}),
		marks:       marks,
		deferFlush:  cfg.JournalSync == SyncProposal,
		ahead:       make(map[string]int),
		aheadKeys:   make(map[string]int),
		aheadErrs:   make(map[string][]error),
	}
	s.aheadDone = sync.NewCond(&s.aheadMu)
	s.refreshCount()
	if bus != nil {
		s.unsub = bus.Subscribe(idemTopic, func(p []byte) {
			if p == nil {
				s.wakeAll() // notifications may have been missed
				return
			}
			s.wake(string(p))
		})
	}
	s.wg.Add(1)
	go s.renewLoop()
	if bus != nil {
		s.wg.Add(1)
		go s.publishLoop()
	}
	return s
}

// close stops the renewals and the notifications. Claims still held are left
// to lapse; waiters blocked in Begin return.
func (s *idempotency) close() {
	s.once.Do(func() {
		s.waitAhead(func() bool { return len(s.ahead) == 0 })
		close(s.stop)
		s.wg.Wait()
		if s.unsub != nil {
			s.unsub()
		}
	})
}

// errClosing is returned to a Begin that waits while the store closes.
var errClosing = errors.New("the shared store is closing; submit the call again once the daemon is back")

// row is what Begin reads of a taken key.
type idemRow struct {
	done      bool
	output    []byte
	holder    string
	token     string        // "" for a free row
	remaining time.Duration // the claim's lease left, by the database's clock
	epoch     uint64
}

// Begin returns a stored result (hit), or a claim under which the caller
// dispatches. A key claimed elsewhere is waited for until it has a result,
// is released, or its lease lapses; the wait ends with ctx.
func (s *idempotency) Begin(ctx context.Context, key, tool, proposalID string) (any, bool, store.Claim, error) {
	return s.begin(ctx, key, "", tool, proposalID)
}

// BeginOrLegacy is Begin that also reads the result an older daemon stored
// under legacy, in the claim's round trip: when the key is claimed and
// legacy holds a result, the claim is released and that result is a hit
// (store.IdempotencyLegacyBeginner).
func (s *idempotency) BeginOrLegacy(ctx context.Context, key, legacy, tool, proposalID string) (any, bool, store.Claim, error) {
	return s.begin(ctx, key, legacy, tool, proposalID)
}

// legacyHit ends c in favour of the result an older daemon stored, raw.
func (s *idempotency) legacyHit(c *claim, key, tool string, raw []byte) (any, bool, store.Claim, error) {
	c.Release()
	out, err := protocol.DecodeValue(raw)
	if err != nil {
		return nil, false, nil, fmt.Errorf("the stored result of idempotency key %s (tool '%s') is not valid JSON: %w", key, tool, err)
	}
	s.marks.note() // it may be a commit not flushed yet: the reply's Flush covers it
	return out, true, nil, nil
}

func (s *idempotency) begin(ctx context.Context, key, legacy, tool, proposalID string) (any, bool, store.Claim, error) {
	token := fmt.Sprintf("%s-%d", s.incarnation, s.tokens.Add(1))
	var wake chan struct{}
	defer func() {
		if wake != nil {
			s.unwatch(key, wake)
		}
	}()
	for {
		sent := time.Now()
		claimed, r, found, old, err := s.claimOrRead(ctx, key, legacy, tool, proposalID, token)
		if err != nil {
			return nil, false, nil, fmt.Errorf("claim idempotency key %s for tool '%s': %w", key, tool, err)
		}
		switch {
		case claimed:
			c := s.hold(key, tool, proposalID, aheadRun(ctx, proposalID), token, r.epoch, sent)
			if old != nil {
				return s.legacyHit(c, key, tool, old)
			}
			return nil, false, c, nil
		case !found:
			continue // released or invalidated since the insert: claim it again
		case r.done:
			out, err := protocol.DecodeValue(r.output)
			if err != nil {
				return nil, false, nil, fmt.Errorf("the stored result of idempotency key %s (tool '%s') is not valid JSON: %w", key, tool, err)
			}
			s.marks.note() // it may be a commit not flushed yet: the reply's Flush covers it
			return out, true, nil, nil
		case r.token == "" || r.remaining <= 0:
			epoch, won, err := s.takeOver(ctx, key, tool, proposalID, token, r.token)
			if err != nil {
				return nil, false, nil, fmt.Errorf("take over idempotency key %s for tool '%s': %w", key, tool, err)
			}
			if won && r.token != "" {
				s.log.Warn("took over an idempotency claim whose lease lapsed: its holder died, stalled or lost the database; its own completion will be refused",
					zap.String("key", key), zap.String("tool", tool), zap.String("holder", r.holder), zap.Uint64("epoch", epoch))
			}
			if won {
				c := s.hold(key, tool, proposalID, aheadRun(ctx, proposalID), token, epoch, sent)
				if legacy != "" {
					raw, found, err := s.result(ctx, legacy)
					if err != nil {
						c.Release()
						return nil, false, nil, fmt.Errorf("read the result an older daemon may have stored for tool '%s' (idempotency key %s): %w", tool, legacy, err)
					}
					if found {
						return s.legacyHit(c, key, tool, raw)
					}
				}
				return nil, false, c, nil
			}
			continue // another waiter won: read again
		}
		if wake == nil {
			// Watch, then read again, so a commit in between is not missed.
			wake = s.watch(key)
			continue
		}
		t := time.NewTimer(min(s.recheck, r.remaining+time.Millisecond))
		select {
		case <-wake:
		case <-t.C:
		case <-s.stop:
			t.Stop()
			return nil, false, nil, fmt.Errorf("wait for idempotency key %s (tool '%s'): %w", key, tool, errClosing)
		case <-ctx.Done():
			t.Stop()
			return nil, false, nil, fmt.Errorf("waited for the same call of tool '%s' (idempotency key %s) running on daemon '%s' until %w; submit it again for its result",
				tool, key, r.holder, ctx.Err())
		}
		t.Stop()
	}
}

// claimOrRead claims key if no row holds it, or else reads the row that
// does, in one statement. The read sees the statement's snapshot: a row that
// a concurrent claim committed after it (the insert waited for that claim)
// is not found, and neither is one deleted meanwhile; Begin then tries again.
//
// The claim's commit does not wait for its flush (synchronous_commit off for
// its transaction alone, set by the statement itself): a step then waits
// for one flush, its result's, whose synchronous commit flushes the log up to
// itself and so the claim's record before it. What a database crash can take
// is a claim not yet flushed, never a result: its holder's Commit then finds
// no claim and acknowledges nothing, and the call is dispatched again when it
// is submitted again — as it already was when the database crashed while the
// call ran, since its holder could not store the result. See
// docs/operations.md, *Idempotency claims*.
//
// With legacy set, the same round trip reads the result an older daemon
// stored under legacy (old, nil when there is none).
func (s *idempotency) claimOrRead(ctx context.Context, key, legacy, tool, proposalID, token string) (claimed bool, r idemRow, found bool, old []byte, err error) {
	var holder, tok *string
	var ms, epoch int64
	// One statement: the setting (the insert selects from it, so it is set
	// before the claim), the claim or the row that holds the key, and the
	// legacy key's result.
	err = s.pool.QueryRow(ctx, `
		WITH cfg AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v),
		claim AS (
			INSERT INTO car_idempotency (key, tool, proposal_id, holder, token, lease_until, recorded_at, epoch)
			SELECT $1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond', now(), 1 FROM cfg
			ON CONFLICT (key) DO NOTHING
			RETURNING epoch
		),
		legacy AS (SELECT output::text AS output FROM car_idempotency WHERE $7 <> '' AND key = $7 AND done)
		SELECT true, false, NULL::text, NULL::text, NULL::text, 0::bigint, epoch, (SELECT output FROM legacy) FROM claim
		UNION ALL
		SELECT false, done, output::text, holder, token, `+remainingMs+`, epoch, (SELECT output FROM legacy)
		FROM car_idempotency WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM claim)`,
		key, tool, proposalID, s.node, token, s.lease.Milliseconds(), legacy).Scan(&claimed, &r.done, &r.output, &holder, &tok, &ms, &epoch, &old)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, r, false, nil, nil
	}
	if err != nil {
		return false, r, false, nil, unavailable(err)
	}
	r.fill(holder, tok, ms, epoch)
	return claimed, r, !claimed, old, nil
}

// remainingMs is a claim's lease left in milliseconds, by the database's
// clock (0 for a result).
const remainingMs = `COALESCE(ceil(EXTRACT(EPOCH FROM (lease_until - now())) * 1000), 0)::bigint`

func (r *idemRow) fill(holder, token *string, ms, epoch int64) {
	r.epoch = uint64(max(epoch, 0))
	if holder != nil {
		r.holder = *holder
	}
	if token != nil {
		r.token = *token
	}
	r.remaining = time.Duration(ms) * time.Millisecond
}

func (s *idempotency) read(ctx context.Context, key string) (idemRow, bool, error) {
	var r idemRow
	var holder, token *string
	var ms, epoch int64
	err := s.pool.QueryRow(ctx, `
		SELECT done, output::text, holder, token, `+remainingMs+`, epoch
		FROM car_idempotency WHERE key = $1`, key).Scan(&r.done, &r.output, &holder, &token, &ms, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, unavailable(err)
	}
	r.fill(holder, token, ms, epoch)
	return r, true, nil
}

// takeOver claims key at its next epoch from the lapsed claim named by old,
// or from a free row when old is "". Concurrent takers serialize on the
// row: the first commits, the others find another token and match nothing.
func (s *idempotency) takeOver(ctx context.Context, key, tool, proposalID, token, old string) (epoch uint64, won bool, err error) {
	var e int64
	err = s.pool.QueryRow(ctx, `
		UPDATE car_idempotency
		SET tool = $2, proposal_id = $3, holder = $4, token = $5,
		    lease_until = now() + $6 * interval '1 millisecond', recorded_at = now(),
		    epoch = epoch + 1
		WHERE key = $1 AND NOT done
		  AND (($7 = '' AND token IS NULL) OR (token = $7 AND lease_until < now()))
		RETURNING epoch`,
		key, tool, proposalID, s.node, token, s.lease.Milliseconds(), old).Scan(&e)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, unavailable(err)
	}
	return uint64(e), true, nil
}

func (s *idempotency) hold(key, tool, proposalID, run, token string, epoch uint64, sent time.Time) *claim {
	c := &claim{s: s, key: key, tool: tool, proposalID: proposalID, run: run, token: token, epoch: epoch}
	c.leased.Store(sent.UnixNano())
	s.mu.Lock()
	s.held[token] = c
	s.mu.Unlock()
	return c
}

// drop stops renewing c; it reports whether c was still held.
func (s *idempotency) drop(c *claim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.held[c.token]
	delete(s.held, c.token)
	return ok
}

func (s *idempotency) watch(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.waiters[key]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		s.waiters[key] = m
	}
	m[ch] = struct{}{}
	return ch
}

func (s *idempotency) unwatch(key string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters[key], ch)
	if len(s.waiters[key]) == 0 {
		delete(s.waiters, key)
	}
}

// wake tells this daemon's waiters for key to read it again.
func (s *idempotency) wake(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll tells every waiter of this daemon to read its key again.
func (s *idempotency) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.waiters {
		for ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// announce wakes this daemon's waiters for key and, through the bus, every
// other daemon's. A full queue drops the notification: waiters re-check.
func (s *idempotency) announce(key string) {
	s.wake(key)
	if s.bus == nil {
		return
	}
	select {
	case s.notify <- key:
	default:
	}
}

// notifyBatch bounds the keys one statement publishes.
const notifyBatch = 256

// notifyGather is how long a notification waits for others to go with it:
// another daemon's waiter for the key wakes this much later at most.
const notifyGather = 5 * time.Millisecond

// publishLoop publishes the keys announced, each as its own notification,
// and what queued while one statement ran goes out in the next: a burst of
// commits costs one round trip and one notifying transaction, not one each.
// (Every notifying transaction of the cluster waits its turn at
// PostgreSQL's notification queue lock until its commit is flushed, so
// notifications sent one by one cap the commits a cluster can announce.)
func (s *idempotency) publishLoop() {
	defer s.wg.Done()
	keys := make([]string, 0, notifyBatch)
	for {
		select {
		case <-s.stop:
			return
		case key := <-s.notify:
			keys = append(keys[:0], key)
		}
		// Gather what the next notifyGather brings, so that a chain of
		// commits costs a notifying transaction per notifyGather, not one
		// per step; this daemon's own waiters were woken at once.
		t := time.NewTimer(notifyGather)
		select {
		case <-t.C:
		case <-s.stop:
		}
		t.Stop()
	queued:
		for len(keys) < notifyBatch {
			select {
			case key := <-s.notify:
				keys = append(keys, key)
			default:
				break queued
			}
		}
		s.publish(keys)
	}
}

// publish sends keys on the bus. A key the bus cannot carry (too long) is
// left out: its waiters re-check.
func (s *idempotency) publish(keys []string) {
	ok := keys[:0]
	for _, k := range keys {
		if err := checkPayload(idemTopic, []byte(k)); err != nil {
			s.log.Debug("idempotency notification not published; waiters will re-check", zap.Error(err))
			continue
		}
		ok = append(ok, k)
	}
	if len(ok) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.bound)
	defer cancel()
	if err := s.bus.PublishEach(ctx, idemTopic, ok); err != nil {
		s.log.Debug("idempotency notifications not published; waiters will re-check", zap.Int("keys", len(ok)), zap.Error(err))
	}
}

// countEvery is how often the count of results (a scan of the table) is
// taken again.
const countEvery = time.Minute

// renewLoop extends the lease of every held claim every third of the lease,
// in one statement, and counts the results again every minute or so.
func (s *idempotency) renewLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	counted := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.renewing.Lock()
		if !s.noRenew.Load() {
			s.renew()
		}
		s.renewing.Unlock()
		if time.Since(counted) >= countEvery {
			s.refreshCount()
			counted = time.Now()
		}
	}
}

func (s *idempotency) renew() {
	s.mu.Lock()
	tokens := make([]string, 0, len(s.held))
	for t := range s.held {
		tokens = append(tokens, t)
	}
	s.mu.Unlock()
	if len(tokens) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.bound)
	defer cancel()
	sent := time.Now().UnixNano()
	rows, err := s.pool.Query(ctx, `
		UPDATE car_idempotency SET lease_until = now() + $2 * interval '1 millisecond'
		WHERE token = ANY($1) AND NOT done
		RETURNING token`, tokens, s.lease.Milliseconds())
	if err != nil {
		s.log.Warn("idempotency leases not renewed; they lapse unless the next renewal succeeds", zap.Int("claims", len(tokens)), zap.Error(err))
		return
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		s.log.Warn("idempotency leases not renewed; they lapse unless the next renewal succeeds", zap.Int("claims", len(tokens)), zap.Error(err))
		return
	}
	ok := make(map[string]bool, len(renewed))
	for _, t := range renewed {
		ok[t] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		if c, held := s.held[t]; held && ok[t] {
			c.leased.Store(sent)
		} else if held {
			// Taken over or deleted: the holder's Commit will say so.
			delete(s.held, t)
			s.log.Warn("an idempotency claim was lost while its call ran: taken over after its lease lapsed, or invalidated",
				zap.String("key", c.key), zap.String("tool", c.tool))
		}
	}
}

// refreshCount counts the stored results (Len).
func (s *idempotency) refreshCount() {
	ctx, cancel := context.WithTimeout(context.Background(), s.bound)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM car_idempotency WHERE done`).Scan(&n); err == nil {
		s.count.Store(n)
	}
}

// Len is the number of stored results as last counted, approximately: this
// daemon's own commits and invalidations count at once, other daemons' when
// the table is counted again (every minute or so). It never waits on the
// database.
func (s *idempotency) Len() int { return int(max(s.count.Load(), 0)) }

// Result reads the stored result of key without claiming it; a claim in
// flight is no result.
func (s *idempotency) Result(ctx context.Context, key string) (any, bool, error) {
	s.waitAhead(func() bool { return s.aheadKeys[key] == 0 }) // this daemon reads its own results
	output, found, err := s.result(ctx, key)
	if err != nil || !found {
		return nil, false, err
	}
	s.marks.note() // it may be a commit not flushed yet: the reply's Flush covers it
	out, err := protocol.DecodeValue(output)
	if err != nil {
		return nil, false, fmt.Errorf("the stored result of idempotency key %s is not valid JSON: %w", key, err)
	}
	return out, true, nil
}

// result reads the stored result of key, as stored.
func (s *idempotency) result(ctx context.Context, key string) ([]byte, bool, error) {
	var output []byte
	err := s.pool.QueryRow(ctx, `SELECT output::text FROM car_idempotency WHERE key = $1 AND done`, key).Scan(&output)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the result of idempotency key %s: %w", key, unavailable(err))
	}
	return output, true, nil
}

// Invalidate frees the rows (results, and any claim) proposalID recorded
// for keys: the proposal rolled back. The rows keep their epochs.
func (s *idempotency) Invalidate(ctx context.Context, keys []string, proposalID string) error {
	if len(keys) == 0 {
		return nil
	}
	// A result sent ahead lands first, so that it is not stored after the
	// rollback; its error, if any, is the reply's concern (Flush).
	run := aheadRun(ctx, proposalID)
	s.waitAhead(func() bool { return s.ahead[run] == 0 })
	rows, err := s.pool.Query(ctx, `
		WITH old AS (
			SELECT key, done FROM car_idempotency
			WHERE key = ANY($1) AND proposal_id = $2 AND (done OR token IS NOT NULL)
			FOR UPDATE
		)
		UPDATE car_idempotency i
		SET done = false, output = NULL, holder = NULL, token = NULL, lease_until = NULL, recorded_at = now()
		FROM old WHERE i.key = old.key
		RETURNING old.done`, keys, proposalID)
	if err != nil {
		return fmt.Errorf("invalidate %d idempotency results of proposal %s: %w", len(keys), proposalID, unavailable(err))
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return fmt.Errorf("invalidate %d idempotency results of proposal %s: %w", len(keys), proposalID, unavailable(err))
	}
	for _, d := range done {
		if d {
			s.count.Add(-1)
		}
	}
	return nil
}

// claim is the right to dispatch one idempotent call.
type claim struct {
	s          *idempotency
	key, tool  string
	proposalID string
	run        string // aheadRun of the Begin's context
	token      string
	epoch      uint64
	ended      atomic.Bool
	// leased is when the lease was last set (unix nanoseconds): just
	// before the claim's statement or the last renewal that covered it
	// was sent, so the database's lease runs past leased + lease.
	leased atomic.Int64
}

// Epoch is the claim's fencing token.
func (c *claim) Epoch() uint64 { return c.epoch }

// Commit stores output as the key's result, if this claim still holds the
// key. It ends the claim whatever happens: after an error the row is left to
// its lease (a lost database) or to its new holder.
func (c *claim) Commit(ctx context.Context, output any) error {
	if c.ended.Swap(true) {
		return fmt.Errorf("the claim on idempotency key %s (tool '%s') was already committed or released", c.key, c.tool)
	}
	s := c.s
	s.drop(c)
	raw, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode the result of tool '%s': %w", c.tool, err)
	}
	if s.deferFlush && !s.noAhead.Load() && time.Since(time.Unix(0, c.leased.Load())) < s.lease/2 {
		s.sendAhead(c, raw)
		return nil
	}
	tag, err := s.commit(ctx, c, raw)
	if err != nil {
		return fmt.Errorf("store the result of tool '%s' (idempotency key %s): %w", c.tool, c.key, unavailable(err))
	}
	if tag.RowsAffected() == 1 {
		s.count.Add(1)
		s.announce(c.key)
		return nil
	}
	return c.lost(ctx)
}

const commitResult = `
	UPDATE car_idempotency SET output = $3::json, done = true, lease_until = NULL, recorded_at = now()
	WHERE key = $1 AND token = $2 AND epoch = $4 AND NOT done`

// commit stores c's result. Under journal_sync = full the commit waits for
// its flush, which flushes every commit this daemon made before without
// waiting (its claim's among them). Under proposal it does not wait (one
// round trip still: the setting goes with the update): the result is
// visible to every daemon at once, and the proposal's Flush makes it
// durable before the reply.
func (s *idempotency) commit(ctx context.Context, c *claim, raw []byte) (pgconn.CommandTag, error) {
	if s.deferFlush {
		// The setting is a condition of the update: a row updated has set it.
		tag, err := s.pool.Exec(ctx, commitResult+` AND set_config('synchronous_commit', 'off', true) IS NOT NULL`,
			c.key, c.token, string(raw), int64(c.epoch))
		if err == nil && tag.RowsAffected() == 1 {
			s.marks.note()
		}
		return tag, err
	}
	m := s.marks.before()
	// As the flush statement does: a server, database or role whose
	// synchronous_commit is off commits this update synchronously all the
	// same, so that it is flushed before the step ends and covers the marks.
	tag, err := s.pool.Exec(ctx, commitResult+` AND (current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) IS NOT NULL)`,
		c.key, c.token, string(raw), int64(c.epoch))
	if err == nil && tag.RowsAffected() == 1 {
		s.marks.synced(m) // it changed a row, so it waited for its flush
	}
	return tag, err
}

// sendAhead commits c's result without waiting for the answer
// (journal_sync = proposal, the claim's lease well within its term): the
// step goes on at once, and the proposal's Flush waits for the answer and
// reports an update that stored nothing (a claim superseded or invalidated
// meanwhile, the database gone) as the error of that proposal's reply, so
// no result is acknowledged that was not stored. The update is the one
// Commit makes (guarded by the claim's token and epoch), so what it stores
// is the same; only when a refusal is known changes. A claim whose lease
// may have lapsed (its holder stalled) is committed in place instead, so
// that a holder superseded after a stall learns it at Commit.
func (s *idempotency) sendAhead(c *claim, raw []byte) {
	s.aheadMu.Lock()
	s.ahead[c.run]++
	s.aheadKeys[c.key]++
	s.aheadMu.Unlock()
	s.count.Add(1) // as committed; taken back if the update stores nothing
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.bound)
		defer cancel()
		tag, err := s.commit(ctx, c, raw)
		switch {
		case err != nil:
			err = fmt.Errorf("store the result of tool '%s' (idempotency key %s): %w", c.tool, c.key, unavailable(err))
		case tag.RowsAffected() != 1:
			err = c.lost(ctx)
		}
		if err != nil {
			s.count.Add(-1)
		} else {
			s.announce(c.key)
		}
		s.aheadMu.Lock()
		defer s.aheadMu.Unlock()
		if err != nil {
			s.aheadErrs[c.run] = append(s.aheadErrs[c.run], err)
		}
		if s.ahead[c.run]--; s.ahead[c.run] == 0 {
			delete(s.ahead, c.run)
		}
		if s.aheadKeys[c.key]--; s.aheadKeys[c.key] == 0 {
			delete(s.aheadKeys, c.key)
		}
		s.aheadDone.Broadcast()
	}()
}

// aheadRun names the run whose updates sent ahead a Flush waits for: the
// engine's run of ctx (store.WithRun), else the proposal id, which two runs
// may share.
func aheadRun(ctx context.Context, proposalID string) string {
	if id, ok := store.RunOf(ctx); ok {
		return "run " + strconv.FormatUint(id, 10)
	}
	return "proposal " + proposalID
}

// waitAhead waits, under aheadMu, until done holds. The updates it waits
// for end within one statement's bound.
func (s *idempotency) waitAhead(done func() bool) {
	s.aheadMu.Lock()
	defer s.aheadMu.Unlock()
	for !done() {
		s.aheadDone.Wait()
	}
}

// Flush returns once every result proposalID sent ahead is answered and
// every result this daemon committed, and every result Begin or Result
// returned (another daemon's may have been committed without waiting),
// before the call is flushed: at once when a synchronous commit since
// covered them, else after one that writes this daemon's car_flush row
// (store.IdempotencyFlusher; the engine calls it before it answers a
// proposal that committed or read a result). A result of proposalID sent
// ahead that was not stored is its error.
func (s *idempotency) Flush(ctx context.Context, proposalID string) error {
	run := aheadRun(ctx, proposalID)
	s.waitAhead(func() bool { return s.ahead[run] == 0 })
	s.aheadMu.Lock()
	errs := s.aheadErrs[run]
	delete(s.aheadErrs, run)
	s.aheadMu.Unlock()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := s.marks.flush(ctx); err != nil {
		return fmt.Errorf("flush the idempotent results to disk: %w", err)
	}
	return nil
}

// lost says why a Commit matched no row.
func (c *claim) lost(ctx context.Context) error {
	r, found, err := c.s.read(ctx, c.key)
	switch {
	case err != nil:
		return fmt.Errorf("%w: tool '%s' (idempotency key %s) ran, but its claim no longer holds the key (%w); its result was not stored, do not acknowledge it",
			ErrClaimLost, c.tool, c.key, err)
	case !found || r.epoch <= c.epoch:
		return fmt.Errorf("%w: tool '%s' (idempotency key %s) ran, but its claim was invalidated while it ran; its result was not stored",
			ErrClaimLost, c.tool, c.key)
	case r.done:
		return fmt.Errorf("%w (%w): tool '%s' (idempotency key %s) ran under epoch %d, but daemon '%s' took the claim over at epoch %d after this daemon's lease lapsed and stored its own result; this result was not stored, a resubmission gets the stored one",
			store.ErrSuperseded, ErrClaimLost, c.tool, c.key, c.epoch, r.holder, r.epoch)
	default:
		return fmt.Errorf("%w (%w): tool '%s' (idempotency key %s) ran under epoch %d, but daemon '%s' took the claim over at epoch %d after this daemon's lease lapsed and runs it now; this result was not stored, the taker's will be",
			store.ErrSuperseded, ErrClaimLost, c.tool, c.key, c.epoch, r.holder, r.epoch)
	}
}

// Release gives the claim up (the call failed): the row is freed (keeping
// its epoch) and the waiters wake, so one of them claims the key. If the database cannot be
// reached, the claim lapses with its lease instead.
func (c *claim) Release() {
	if c.ended.Swap(true) {
		return
	}
	s := c.s
	s.drop(c)
	ctx, cancel := context.WithTimeout(context.Background(), s.bound)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `
		UPDATE car_idempotency SET holder = NULL, token = NULL, lease_until = NULL
		WHERE key = $1 AND token = $2 AND NOT done`, c.key, c.token); err != nil {
		s.log.Warn("an idempotency claim was not released; it lapses with its lease", zap.String("key", c.key), zap.String("tool", c.tool), zap.Error(err))
		return
	}
	s.announce(c.key)
}
