package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// supervisors is the registry of live supervisor subscriptions in
// car_supervisors, one row per (daemon, session). A daemon's rows are
// removed when it opens (what a previous run left) and when it closes;
// the rows of a member that is not alive (it died without closing) are
// ignored, so "a supervisor exists somewhere" means one whose daemon
// heartbeats.
type supervisors struct {
	pool        *pgxpool.Pool
	node        string
	timeout     time.Duration
	aliveWithin time.Duration
}

var _ store.Supervisors = (*supervisors)(nil)

// Register records session's supervisor subscription on this daemon (again:
// its filter is replaced).
func (s *supervisors) Register(ctx context.Context, session string, filter any) error {
	var f *string
	if filter != nil {
		b, err := json.Marshal(filter)
		if err != nil {
			return fmt.Errorf("a supervisor's filter must be JSON: %w", err)
		}
		text := string(b)
		f = &text
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO car_supervisors (node, session, filter, since) VALUES ($1, $2, $3::json, now())
		ON CONFLICT (node, session) DO UPDATE SET filter = EXCLUDED.filter`, s.node, session, f)
	if err != nil {
		return fmt.Errorf("register the supervisor of session %q: %w", session, unavailable(err))
	}
	return nil
}

// Unregister removes session's subscription on this daemon.
func (s *supervisors) Unregister(ctx context.Context, session string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "DELETE FROM car_supervisors WHERE node = $1 AND session = $2", s.node, session); err != nil {
		return fmt.Errorf("unregister the supervisor of session %q: %w", session, unavailable(err))
	}
	return nil
}

// removeAll removes every subscription of this daemon.
func (s *supervisors) removeAll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "DELETE FROM car_supervisors WHERE node = $1", s.node); err != nil {
		return fmt.Errorf("remove the supervisors of member %q: %w", s.node, unavailable(err))
	}
	return nil
}

// aliveSQL selects the subscriptions whose member heartbeat recently.
const aliveSQL = `FROM car_supervisors s JOIN car_nodes n ON n.id = s.node
	WHERE n.last_heartbeat > now() - make_interval(secs => $1)`

// Alive lists the subscriptions of live members, by member and session.
func (s *supervisors) Alive(ctx context.Context) ([]store.Supervisor, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT s.node, s.session, s.filter::text, s.since "+aliveSQL+" ORDER BY s.node, s.session", s.aliveWithin.Seconds())
	if err != nil {
		return nil, fmt.Errorf("list the supervisors: %w", unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Supervisor, error) {
		var sv store.Supervisor
		var filter *string
		if err := row.Scan(&sv.Node, &sv.Session, &filter, &sv.Since); err != nil {
			return sv, err
		}
		if filter != nil {
			sv.Filter = json.RawMessage(*filter)
		}
		sv.Since = sv.Since.UTC()
		return sv, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the supervisors: %w", unavailable(err))
	}
	if out == nil {
		out = []store.Supervisor{}
	}
	return out, nil
}

// AnyAlive says whether a live member has a supervisor subscription.
func (s *supervisors) AnyAlive(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var found bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 "+aliveSQL+")", s.aliveWithin.Seconds()).Scan(&found); err != nil {
		return false, fmt.Errorf("look for a live supervisor: %w", unavailable(err))
	}
	return found, nil
}
