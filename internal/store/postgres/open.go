package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// DB is one daemon's handle on the shared store.
type DB struct {
	cfg  Config
	pool *pgxpool.Pool

	bus          *bus
	nodes        *nodes
	approvals    *ledger
	state        *state
	messages     *messages
	supervisors  *supervisors
	idem         *idempotency
	events       *events
	runs         *runLog
	agentTokens  *agentTokens
	people       *people
	postures     *postures
	trajectories *trajectories
	leases       *leases
	harness      *harness
	taint        *taint
	marks        *walMarks // commits not waited for, and the flushes that cover them

	closeOnce sync.Once
}

// Open connects (bounded pool, statement timeout), applies the embedded
// migrations under the advisory lock, and refuses a database whose schema
// is newer than this binary. Then it starts this daemon's heartbeat, its
// notification listener and its approval cache.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg.setDefaults()
	if cfg.Node == "" {
		return nil, fmt.Errorf("a member id (Node) is required")
	}
	pool, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMigrator(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	_, err = m.up(ctx)
	m.close()
	if err != nil {
		pool.Close()
		return nil, err
	}
	db := &DB{cfg: cfg, pool: pool}
	if err := db.start(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// opTimeout bounds one operation on the database: a connection, then a
// statement.
func (db *DB) opTimeout() time.Duration { return db.cfg.ConnectTimeout + db.cfg.StatementTimeout }

// start builds the parts; Close stops whichever were started.
func (db *DB) start(ctx context.Context) error {
	t := db.opTimeout()
	db.marks = &walMarks{pool: db.pool, node: db.cfg.Node}
	var err error
	if db.nodes, err = startNodes(ctx, db.pool, db.cfg.Node, db.cfg.Version, db.cfg.Heartbeat, t); err != nil {
		return err
	}
	db.supervisors = &supervisors{pool: db.pool, node: db.cfg.Node, timeout: t, aliveWithin: db.nodes.aliveWithin()}
	if err := db.supervisors.removeAll(ctx); err != nil { // a previous run's
		return err
	}
	db.state = &state{pool: db.pool, timeout: t}
	db.messages = &messages{pool: db.pool, timeout: t}
	db.leases = &leases{pool: db.pool, timeout: t}
	db.harness = &harness{pool: db.pool, timeout: t}
	db.taint = &taint{pool: db.pool, timeout: t}
	db.bus = newBus(db.pool, t)
	db.runs = &runLog{pool: db.pool, node: db.cfg.Node, timeout: t}
	db.agentTokens = &agentTokens{pool: db.pool, bus: db.bus, timeout: t}
	db.people = &people{pool: db.pool, timeout: t}
	db.trajectories = newTrajectories(db.pool, t)
	db.postures = &postures{pool: db.pool, bus: db.bus, timeout: t, recheck: db.cfg.ApprovalRecheck}
	// Waiters for an idempotency claim wake when it is committed or
	// released anywhere, and re-check on a timer in case a notice is lost.
	db.idem = newIdempotency(db.pool, db.cfg, db.bus, db.marks)
	if db.events, err = openEvents(db.pool, db.cfg, db.marks); err != nil {
		return err
	}
	db.approvals, err = openLedger(ctx, db.pool, db.bus, db.cfg.Node, t, db.cfg.ApprovalRecheck)
	return err
}

// Store returns the seam's view of db.
func (db *DB) Store() *store.Store {
	return &store.Store{
		Kind: "postgres", Node: db.cfg.Node, Close: db.Close,
		Approvals: db.approvals, Idempotency: db.idem, State: db.state, Messages: db.messages, Events: db.events, Bus: db.bus,
		Members: db.nodes, Supervisors: db.supervisors, Health: db.nodes.Health,
		Runs: db.runs, AgentTokens: db.agentTokens, Postures: db.postures, Trajectories: db.trajectories, Leases: db.leases, Harness: db.harness,
		People: db.people, Taint: db.taint,
	}
}

// EventStats counts what the event writer wrote, spooled and refused.
func (db *DB) EventStats() EventStats { return db.events.Stats() }

// Close writes out the queued events (to the database, or to the spool,
// within a bound), stops the background work (heartbeat, listener, approval
// re-check, claim renewals), removes this daemon's supervisor subscriptions
// and releases the pool. This daemon's member row stays, and ages;
// idempotency claims still held are left to lapse with their leases.
func (db *DB) Close() error {
	var err, spoolErr error
	db.closeOnce.Do(func() {
		if db.postures != nil {
			db.postures.close()
		}
		if db.trajectories != nil {
			db.trajectories.close()
		}
		if db.events != nil {
			spoolErr = db.events.close()
		}
		if db.approvals != nil {
			db.approvals.close()
		}
		if db.idem != nil {
			db.idem.close()
		}
		if db.bus != nil {
			db.bus.close()
		}
		if db.nodes != nil {
			db.nodes.close()
		}
		if db.supervisors != nil {
			err = db.supervisors.removeAll(context.Background())
		}
		db.pool.Close()
	})
	if errors.Is(err, store.ErrUnavailable) {
		err = nil // the rows of a daemon that is not alive are ignored anyway
	}
	return errors.Join(spoolErr, err)
}

// OpenTokens is a handle on the agents' token hashes alone, for the
// operator's commands (car-server agents): a bounded pool, no member row,
// no listener. The database must be migrated to this binary's schema; it
// is not migrated here. close releases the pool.
func OpenTokens(ctx context.Context, cfg Config) (tokens store.AgentTokens, close func(), err error) {
	pool, timeout, err := openOperatorPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return &agentTokens{pool: pool, timeout: timeout}, pool.Close, nil
}

// OpenPeople is OpenTokens for the people's token hashes (car-server
// people).
func OpenPeople(ctx context.Context, cfg Config) (tokens store.People, close func(), err error) {
	pool, timeout, err := openOperatorPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return &people{pool: pool, timeout: timeout}, pool.Close, nil
}

// OpenEventReader is a handle on the shared event log alone, for car-server
// audit verify --store: read is store.Events.Since of every daemon. It
// writes nothing. close releases the pool.
func OpenEventReader(ctx context.Context, cfg Config) (read func(ctx context.Context, cursor int64, limit int) ([]store.EventRecord, int64, error), close func(), err error) {
	pool, _, err := openOperatorPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	e := &events{pool: pool}
	return func(ctx context.Context, cursor int64, limit int) ([]store.EventRecord, int64, error) {
		return e.Since(ctx, cursor, limit, "")
	}, pool.Close, nil
}

// openOperatorPool is a bounded pool for an operator's command, on a
// database already at this binary's schema, with the timeout of one call.
func openOperatorPool(ctx context.Context, cfg Config) (*pgxpool.Pool, time.Duration, error) {
	cfg.setDefaults()
	pool, err := connect(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	m, err := newMigrator(pool)
	if err != nil {
		pool.Close()
		return nil, 0, err
	}
	current, known, err := m.versions(ctx)
	m.close()
	switch {
	case err != nil:
		err = unavailable(err)
	case current > known:
		err = schemaNewer(current, known)
	case current < known:
		err = fmt.Errorf("the database is at schema version %d, this binary needs %d: run car-server migrate up (or start a daemon) first", current, known)
	}
	if err != nil {
		pool.Close()
		return nil, 0, err
	}
	return pool, cfg.ConnectTimeout + cfg.StatementTimeout, nil
}
