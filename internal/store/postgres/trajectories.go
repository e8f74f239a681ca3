package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// trajectories keeps one row per dispatched attempt in car_trajectories,
// keyed by its UTC day: a window reads only its days (the day index), and
// retention deletes whole days.
type trajectories struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.Trajectories = (*trajectories)(nil)

func (s *trajectories) Append(ctx context.Context, t store.Trajectory) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.pool.Exec(ctx,
		`INSERT INTO car_trajectories (day, at, tool, principal, status, duration_ms, attempt) VALUES ($1::date, $2, $3, $4, $5, $6, $7)`,
		store.TrajectoryDay(t.At), t.At.UTC(), t.Tool, t.Principal, t.Status, t.DurationMs, t.Attempt)
	if err != nil {
		return fmt.Errorf("record a trajectory: %w", unavailable(err))
	}
	return nil
}

func (s *trajectories) Scan(ctx context.Context, since time.Time, fn func(store.Trajectory) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx,
		`SELECT at, tool, principal, status, duration_ms, attempt FROM car_trajectories WHERE day >= $1::date`,
		store.TrajectoryDay(since))
	if err != nil {
		return fmt.Errorf("read trajectories: %w", unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var t store.Trajectory
		if err := rows.Scan(&t.At, &t.Tool, &t.Principal, &t.Status, &t.DurationMs, &t.Attempt); err != nil {
			return fmt.Errorf("read trajectories: %w", unavailable(err))
		}
		t.At = t.At.UTC()
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read trajectories: %w", unavailable(err))
	}
	return nil
}

func (s *trajectories) Prune(ctx context.Context, before time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var days int
	err := s.pool.QueryRow(ctx,
		`WITH gone AS (DELETE FROM car_trajectories WHERE day < $1::date RETURNING day) SELECT count(DISTINCT day) FROM gone`,
		store.TrajectoryDay(before)).Scan(&days)
	if err != nil {
		return 0, fmt.Errorf("prune trajectories: %w", unavailable(err))
	}
	return days, nil
}
