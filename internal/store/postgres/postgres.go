// Package postgres is the shared store on PostgreSQL: several daemons, one
// source of truth for approvals, idempotency claims, the messaging dedup
// ledger, shared state, the event log, cross-daemon notifications, the
// member list, the supervisors watching, agent run traces, and the agents'
// token hashes and postures. The schema lives in
// embedded migrations applied at start under an advisory lock.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/internal/store"
)

// Config says how to reach the database and how to behave on it.
type Config struct {
	URL              string        // a libpq URL or keyword/value string; its password never appears in a message
	MaxConns         int32         // pool size (10)
	StatementTimeout time.Duration // per statement, set on every connection (5 s)
	ConnectTimeout   time.Duration // to open a connection (5 s)
	Node             string        // this daemon's member id
	Version          string        // this daemon's version, in the nodes table
	ClaimLease       time.Duration // an idempotency claim's lease, renewed while its call runs (30 s)
	Heartbeat        time.Duration // how often this daemon's car_nodes row is stamped; a member is alive within 3 of them (2 s)
	ApprovalRecheck  time.Duration // how often the approval cache is checked against the database, in case a notification was lost (2 s)
	// SpoolPath is where events wait while the database cannot be reached
	// ($CAR_HOME/events-spool.jsonl); empty keeps them in memory only.
	SpoolPath     string
	SpoolMaxBytes int64       // the spool's bound; past it, events are refused, counted and logged (64 MiB)
	EventQueue    int         // events waiting in memory for the writer; past it, refused, counted and logged (65536)
	Log           *zap.Logger // nil: no log
	// JournalSync is when an idempotent result's commit is flushed:
	// SyncFull ("" too: each result's commit waits for its flush) or
	// SyncProposal (each commit returns at once; Flush, before the
	// proposal's reply, flushes them all).
	JournalSync string

	eventsFlushEvery time.Duration // tests: the writer's flushEvery (0: the constant)
}

// The values of Config.JournalSync, named as the journal_sync setting's.
const (
	SyncFull     = "full"
	SyncProposal = "proposal"
)

// Defaults of the Config the daemon's settings also offer; config prints
// them in --help.
const (
	DefaultMaxConns         = 10
	DefaultStatementTimeout = 5 * time.Second
	DefaultClaimLease       = 30 * time.Second
	DefaultHeartbeat        = 2 * time.Second
	DefaultSpoolMaxBytes    = 64 << 20
)

func (c *Config) setDefaults() {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = DefaultStatementTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.ClaimLease <= 0 {
		c.ClaimLease = DefaultClaimLease
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.ApprovalRecheck <= 0 {
		c.ApprovalRecheck = 2 * time.Second
	}
	if c.SpoolMaxBytes <= 0 {
		c.SpoolMaxBytes = DefaultSpoolMaxBytes
	}
	if c.EventQueue <= 0 {
		c.EventQueue = 65536
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
}

// Redact returns the connection string with any password replaced, for
// logs and errors. A URL keeps its own spelling, its password (in the user
// part or the query) replaced. A keyword/value string (host=… password=…)
// is described from what pgx parsed of it: host, port, user and database,
// never the password. A string pgx cannot read is replaced whole.
func Redact(rawURL string) string {
	if isURL(rawURL) {
		return redactURL(rawURL)
	}
	pc, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return "(an unparsable postgres_url)"
	}
	hosts := []string{pc.Host}
	for _, f := range pc.Fallbacks {
		if f.Host != pc.Host && !slices.Contains(hosts, f.Host) {
			hosts = append(hosts, f.Host)
		}
	}
	out := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", strings.Join(hosts, ","), pc.Port, pc.User, pc.Database)
	if pc.Password != "" {
		out += " password=xxxxx"
	}
	return out
}

// isURL reports whether pgx reads s as a URL rather than keyword/value.
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL is Redact of a URL.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable postgres_url)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// connect opens a bounded pool with the statement timeout set and checks
// that the database answers.
func connect(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	return openPool(ctx, cfg, pc)
}

// poolConfig is the pool's configuration for cfg: bounded, with the
// statement timeout set and dead connections checked after an outage.
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's parse errors can quote the string; say what is wrong without it.
		return nil, fmt.Errorf("postgres_url %s is not a valid libpq URL: %w", Redact(cfg.URL), redactErr(err, cfg.URL))
	}
	pc.MaxConns = cfg.MaxConns
	pc.MinConns = 0
	pc.MaxConnIdleTime = time.Minute
	pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	pc.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(cfg.StatementTimeout.Milliseconds())
	pc.ConnConfig.RuntimeParams["application_name"] = "car-server"
	new(liveness).install(pc)
	return pc, nil
}

// openPool opens the pool pc describes and checks that the database answers.
func openPool(ctx context.Context, cfg Config, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open a pool to %s: %w", Redact(cfg.URL), redactErr(err, cfg.URL))
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: cannot reach PostgreSQL at %s: %w; check that it runs and that postgres_url is right", store.ErrUnavailable, Redact(cfg.URL), redactErr(err, cfg.URL))
	}
	return pool, nil
}

// redactErr keeps err's chain but hides the URL's password should the
// message quote it.
func redactErr(err error, rawURL string) error {
	pw, ok := password(rawURL)
	if !ok {
		return errors.New("(details hidden: they may quote the password)")
	}
	if pw == "" {
		return err
	}
	return &redacted{err: err, pw: pw}
}

// password is the password the connection string carries, as pgx reads it
// (a URL or keyword/value); ok is false when it cannot be told.
func password(raw string) (pw string, ok bool) {
	if pc, err := pgconn.ParseConfig(raw); err == nil {
		return pc.Password, true
	}
	if !isURL(raw) {
		return "", false
	}
	// pgx refused the URL; its password is still where a URL keeps it.
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	if pw, has := u.User.Password(); has {
		return pw, true
	}
	return u.Query().Get("password"), true
}

type redacted struct {
	err error
	pw  string
}

func (r *redacted) Error() string {
	return strings.ReplaceAll(r.err.Error(), r.pw, "xxxxx")
}
func (r *redacted) Unwrap() error { return r.err }

// MigrateUp applies the embedded migrations to the database at cfg.URL (the
// operator's `car-server migrate up`) and returns how many it applied.
func MigrateUp(ctx context.Context, cfg Config) (int, error) {
	cfg.setDefaults()
	pool, err := connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	m, err := newMigrator(pool)
	if err != nil {
		return 0, err
	}
	defer m.close()
	return m.up(ctx)
}

// MigrateStatus lists the embedded migrations and whether each is applied,
// and the database's schema version.
func MigrateStatus(ctx context.Context, cfg Config) ([]MigrationStatus, int64, error) {
	cfg.setDefaults()
	pool, err := connect(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer pool.Close()
	m, err := newMigrator(pool)
	if err != nil {
		return nil, 0, err
	}
	defer m.close()
	st, err := m.status(ctx)
	if err != nil {
		return nil, 0, err
	}
	current, _, err := m.versions(ctx)
	return st, current, err
}

// every calls fn every interval until ctx ends, then closes done: the
// periodic re-checks and the heartbeat.
func every(ctx context.Context, interval time.Duration, done chan<- struct{}, fn func(ctx context.Context)) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}
