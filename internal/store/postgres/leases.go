package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// leases are the agents' leases in car_leases: one counter row per agent
// id. Each method is one statement, so it is linearizable across daemons:
// an acquire's upsert locks the row and re-checks the lease on its latest
// version. Expiry is judged by the database's clock (clock_timestamp()),
// the one clock every daemon shares.
type leases struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.Leases = (*leases)(nil)

// leaseCols are the columns a statement returns, in scanLease's order.
const leaseCols = "epoch, coalesce(holder, ''), expires_at"

// scanLease reads one row of leaseCols.
func scanLease(row pgx.Row, agentID string) (store.Lease, error) {
	l := store.Lease{AgentID: agentID}
	var epoch int64
	var exp *time.Time
	if err := row.Scan(&epoch, &l.Holder, &exp); err != nil {
		return store.Lease{AgentID: agentID}, err
	}
	l.Epoch = uint64(epoch)
	if exp != nil {
		l.ExpiresAt = *exp
	}
	return l, nil
}

// ms is ttl in whole milliseconds, at least one.
func ms(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Acquire takes the lease with the next epoch when it is free. When the
// upsert finds it held, the lease is read to say by whom; if it was freed
// in between, the acquire is tried again (a few times), so the refusal
// names a holder.
func (s *leases) Acquire(ctx context.Context, agentID, holder string, ttl time.Duration) (store.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var cur store.Lease
	for range 3 {
		l, err := scanLease(s.pool.QueryRow(ctx, `INSERT INTO car_leases AS l (agent_id, epoch, holder, expires_at)
			VALUES ($1, 1, $2, clock_timestamp() + $3 * interval '1 millisecond')
			ON CONFLICT (agent_id) DO UPDATE SET epoch = l.epoch + 1, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp()
			RETURNING `+leaseCols, agentID, holder, ms(ttl)), agentID)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return l, fmt.Errorf("acquire the lease of agent %q: %w", agentID, unavailable(err))
		}
		var held bool
		cur, held, err = s.status(ctx, agentID)
		if err != nil {
			return cur, err
		}
		if held {
			break
		}
	}
	return cur, fmt.Errorf("acquire the lease of agent %q: %w by %s at epoch %d", agentID, store.ErrLeaseHeld, cur.Holder, cur.Epoch)
}

// Renew extends a lease holder holds at epoch, keeping the epoch.
func (s *leases) Renew(ctx context.Context, agentID, holder string, epoch uint64, ttl time.Duration) (store.Lease, error) {
	return s.update(ctx, "renew", `UPDATE car_leases SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
		WHERE agent_id = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()
		RETURNING `+leaseCols, agentID, holder, epoch, ms(ttl))
}

// Release frees a lease holder holds at epoch; the row and its epoch stay.
func (s *leases) Release(ctx context.Context, agentID, holder string, epoch uint64) (store.Lease, error) {
	return s.update(ctx, "release", `UPDATE car_leases SET holder = NULL, expires_at = NULL
		WHERE agent_id = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()
		RETURNING `+leaseCols, agentID, holder, epoch)
}

// update runs a conditional UPDATE of one lease; no row is ErrLeaseLost,
// with the lease as it stands.
func (s *leases) update(ctx context.Context, what, sql, agentID, holder string, epoch uint64, args ...any) (store.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if epoch > 1<<63-1 {
		return store.Lease{AgentID: agentID}, fmt.Errorf("%s the lease of agent %q at epoch %d: %w", what, agentID, epoch, store.ErrLeaseLost)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, sql, append([]any{agentID, holder, int64(epoch)}, args...)...), agentID)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, _, serr := s.status(ctx, agentID)
		if serr != nil {
			return cur, serr
		}
		return cur, fmt.Errorf("%s the lease of agent %q at epoch %d: %w", what, agentID, epoch, store.ErrLeaseLost)
	}
	if err != nil {
		return l, fmt.Errorf("%s the lease of agent %q: %w", what, agentID, unavailable(err))
	}
	return l, nil
}

// Status reads the lease (epoch 0 when it was never acquired).
func (s *leases) Status(ctx context.Context, agentID string) (store.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	l, _, err := s.status(ctx, agentID)
	return l, err
}

// status reads the lease and whether it is held, by the database's clock.
func (s *leases) status(ctx context.Context, agentID string) (store.Lease, bool, error) {
	l := store.Lease{AgentID: agentID}
	var epoch int64
	var exp *time.Time
	var held bool
	err := s.pool.QueryRow(ctx, "SELECT epoch, coalesce(holder, ''), expires_at, coalesce(holder IS NOT NULL AND expires_at > clock_timestamp(), false) FROM car_leases WHERE agent_id = $1", agentID).Scan(&epoch, &l.Holder, &exp, &held)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("read the lease of agent %q: %w", agentID, unavailable(err))
	}
	l.Epoch = uint64(epoch)
	if exp != nil {
		l.ExpiresAt = *exp
	}
	return l, held, nil
}
