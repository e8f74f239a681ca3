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

// aliveBeats is how many heartbeat intervals a member may miss before it
// is listed as not alive.
const aliveBeats = 3

// nodes stamps this daemon's car_nodes row every interval (its start time
// kept from this start) and lists every member. The heartbeat doubles as
// the store's health check: Health reports its last failure until the next
// one succeeds.
type nodes struct {
	pool     *pgxpool.Pool
	id       string
	version  string
	started  time.Time
	interval time.Duration
	timeout  time.Duration

	mu     sync.Mutex
	health error

	stop context.CancelFunc
	done chan struct{}
}

var _ store.Members = (*nodes)(nil)

// startNodes stamps the row once (a failure fails the start) and then
// keeps stamping it until close.
func startNodes(ctx context.Context, pool *pgxpool.Pool, id, version string, interval, timeout time.Duration) (*nodes, error) {
	n := &nodes{pool: pool, id: id, version: version, started: time.Now().UTC(), interval: interval, timeout: timeout, done: make(chan struct{})}
	if err := n.beat(ctx); err != nil {
		return nil, err
	}
	bctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	go every(bctx, n.interval, n.done, func(ctx context.Context) {
		_ = n.beat(ctx) // Health reports a failure
	})
	return n, nil
}

func (n *nodes) close() {
	n.stop()
	<-n.done
}

// beat stamps the row with the database's clock and records the outcome.
func (n *nodes) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	_, err := n.pool.Exec(ctx, `INSERT INTO car_nodes (id, version, started_at, last_heartbeat) VALUES ($1, $2, $3, now())
		ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, started_at = EXCLUDED.started_at, last_heartbeat = now()`,
		n.id, n.version, n.started)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return err // closing: not a health failure
		}
		err = unavailable(err)
		if !errors.Is(err, store.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		err = fmt.Errorf("the heartbeat of member %q at %s failed: %w", n.id, time.Now().UTC().Format(time.RFC3339), err)
	}
	n.mu.Lock()
	n.health = err
	n.mu.Unlock()
	return err
}

// Health is nil while the last heartbeat committed, else why it did not;
// the error wraps store.ErrUnavailable.
func (n *nodes) Health() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.health
}

// List returns every member that ever heartbeat, by id; a member is alive
// while its last heartbeat is within 3 of this daemon's intervals, by the
// database's clock.
func (n *nodes) List(ctx context.Context) ([]store.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	rows, err := n.pool.Query(ctx, `SELECT id, version, started_at, last_heartbeat,
			last_heartbeat > now() - make_interval(secs => $1)
		FROM car_nodes ORDER BY id`, n.aliveWithin().Seconds())
	if err != nil {
		return nil, fmt.Errorf("list the members: %w", unavailable(err))
	}
	defer rows.Close()
	out := []store.Member{}
	for rows.Next() {
		var m store.Member
		if err := rows.Scan(&m.ID, &m.Version, &m.StartedAt, &m.LastHeartbeat, &m.Alive); err != nil {
			return nil, fmt.Errorf("list the members: %w", unavailable(err))
		}
		m.StartedAt, m.LastHeartbeat = m.StartedAt.UTC(), m.LastHeartbeat.UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the members: %w", unavailable(err))
	}
	return out, nil
}

// aliveWithin is how recent a live member's heartbeat is.
func (n *nodes) aliveWithin() time.Duration { return aliveBeats * n.interval }
