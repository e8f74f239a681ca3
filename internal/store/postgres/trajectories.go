package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/metrics"
	"github.com/parslee-ai/car-server/internal/store"
)

// trajectories keeps one row per dispatched attempt in car_trajectories,
// keyed by its UTC day: a window reads only its days (the day index), and
// retention deletes whole days.
//
// A record is statistics, not a result: as the file store appends its line
// without fsync, Append here only queues the record, and one writer inserts
// what queued in the last trajectoryGather (100 ms), in one statement
// committed without waiting for its flush (synchronous_commit off). A step's path
// then makes no round trip and no flush for it. What a crash can lose: a
// daemon's, the records still queued (those of the last 100 ms or so); the
// database's, the last ones committed and not yet flushed (PostgreSQL's
// WAL writer flushes them within a few hundred milliseconds). Scan and
// Prune first wait for what was queued before them, so this daemon reads
// its own records; Close writes the queue out.
type trajectories struct {
	pool    *pgxpool.Pool
	timeout time.Duration

	mu      sync.Mutex
	queue   []store.Trajectory
	queued  uint64 // records queued since the start
	handled uint64 // of those, inserted or counted as failed
	closed  bool
	moved   chan struct{} // closed (and replaced) when handled moves

	signal chan struct{}
	now    chan struct{} // a reader waits: write without gathering
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

var _ store.Trajectories = (*trajectories)(nil)

const (
	// trajectoryQueue bounds the records waiting for the writer; past it
	// a record is refused (counted in car_trajectory_write_failures_total).
	trajectoryQueue = 65536
	// trajectoryBatch bounds the records one insert writes.
	trajectoryBatch = 1000
	// trajectoryGather is how long the writer gathers records before an
	// insert: a busy daemon writes one insert per this, not one per step.
	trajectoryGather = 100 * time.Millisecond
)

func newTrajectories(pool *pgxpool.Pool, timeout time.Duration) *trajectories {
	s := &trajectories{pool: pool, timeout: timeout, moved: make(chan struct{}),
		signal: make(chan struct{}, 1), now: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// errTrajectoryQueue refuses a record while the writer is far behind.
var errTrajectoryQueue = errors.New("record a trajectory: the writer's queue is full (the database has been slow for long)")

// Append queues t for the writer; it never waits on the database.
func (s *trajectories) Append(_ context.Context, t store.Trajectory) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return errors.New("record a trajectory: the store is closed")
	case len(s.queue) >= trajectoryQueue:
		s.mu.Unlock()
		return errTrajectoryQueue
	}
	s.queue = append(s.queue, t)
	s.queued++
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return nil
}

// run is the writer: it inserts what queued at most every
// trajectoryGather, or at once when a reader waits.
func (s *trajectories) run() {
	defer close(s.done)
	for {
		select {
		case <-s.signal:
		case <-s.stop:
			s.writeQueued()
			return
		}
		t := time.NewTimer(trajectoryGather)
		select {
		case <-t.C:
		case <-s.now:
		case <-s.stop:
		}
		t.Stop()
		s.writeQueued()
	}
}

// writeQueued inserts what is queued, in batches. A batch the database
// does not take is counted as failed records, as a failed insert was.
func (s *trajectories) writeQueued() {
	for {
		s.mu.Lock()
		n := min(len(s.queue), trajectoryBatch)
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		if len(s.queue) == 0 {
			s.queue = nil
		}
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if err := s.insert(batch); err != nil {
			metrics.TrajectoryWriteFailures.Add(float64(n))
		}
		s.mu.Lock()
		s.handled += uint64(n)
		close(s.moved)
		s.moved = make(chan struct{})
		s.mu.Unlock()
	}
}

func (s *trajectories) insert(recs []store.Trajectory) error {
	n := len(recs)
	days, tools, principals, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats, durations, attempts := make([]time.Time, n), make([]float64, n), make([]int64, n)
	for i, t := range recs {
		days[i], ats[i], tools[i], principals[i], statuses[i], durations[i], attempts[i] =
			store.TrajectoryDay(t.At), t.At.UTC(), t.Tool, t.Principal, string(t.Status), t.DurationMs, int64(t.Attempt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(`INSERT INTO car_trajectories (day, at, tool, principal, status, duration_ms, attempt)
		SELECT * FROM unnest($1::date[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::int[])`,
		days, ats, tools, principals, statuses, durations, attempts)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record %d trajectories: %w", n, unavailable(err))
	}
	return nil
}

// written returns once every record queued before the call is inserted or
// counted as failed.
func (s *trajectories) written(ctx context.Context) error {
	s.mu.Lock()
	target := s.queued
	if s.handled < target {
		select {
		case s.now <- struct{}{}:
		default:
		}
	}
	for s.handled < target {
		ch := s.moved
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for the trajectories queued to be written: %w", ctx.Err())
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	return nil
}

// close writes the queue out (each batch within one statement's bound) and
// stops the writer.
func (s *trajectories) close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.done
	})
}

func (s *trajectories) Scan(ctx context.Context, since time.Time, fn func(store.Trajectory) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.written(ctx); err != nil {
		return err
	}
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
	if err := s.written(ctx); err != nil {
		return 0, err
	}
	var days int
	err := s.pool.QueryRow(ctx,
		`WITH gone AS (DELETE FROM car_trajectories WHERE day < $1::date RETURNING day) SELECT count(DISTINCT day) FROM gone`,
		store.TrajectoryDay(before)).Scan(&days)
	if err != nil {
		return 0, fmt.Errorf("prune trajectories: %w", unavailable(err))
	}
	return days, nil
}
