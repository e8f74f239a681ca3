package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// The run log: a head per run in car_runs and its records in
// car_run_records, numbered from 0. Every daemon reads every run; an append
// locks the run's row, so the appends of one run on several daemons are
// ordered and its seqs stay contiguous. A run belongs to the daemon of the
// connection that started it (node): only that daemon marks it incomplete
// when it restarts.
type runLog struct {
	pool    *pgxpool.Pool
	node    string
	timeout time.Duration
}

var _ store.RunLog = (*runLog)(nil)

const runHeadColumns = "run_id, agent_id, intent, owner, node, status, started_at, ended_at, outcome::text, turns, records"

// scanRunHead reads one row of runHeadColumns.
func scanRunHead(row pgx.Row) (store.RunHead, error) {
	var h store.RunHead
	var outcome *string
	if err := row.Scan(&h.RunID, &h.AgentID, &h.Intent, &h.Owner, &h.Node, &h.Status, &h.StartedAt, &h.EndedAt, &outcome, &h.Turns, &h.Records); err != nil {
		return store.RunHead{}, err
	}
	h.StartedAt = h.StartedAt.UTC()
	if h.EndedAt != nil {
		at := h.EndedAt.UTC()
		h.EndedAt = &at
	}
	if outcome != nil {
		h.Outcome = json.RawMessage(*outcome)
	}
	return h, nil
}

// storable refuses text PostgreSQL cannot keep in a text column.
func storable(what, s string) error {
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s holds a NUL character, which the shared store cannot keep; use another", what)
	}
	return nil
}

func (l *runLog) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// Start inserts the run and its record 0 in one transaction, or takes the
// existing run of the same agent over (owner and node set to the caller).
func (l *runLog) Start(ctx context.Context, h store.RunHead, started store.RunRecord) (store.RunHead, bool, error) {
	for what, s := range map[string]string{"run_id": h.RunID, "agent_id": h.AgentID, "intent": h.Intent, "owner": h.Owner} {
		if err := storable(what, s); err != nil {
			return store.RunHead{}, false, err
		}
	}
	if err := store.CheckRunRecord(0, started.Body); err != nil {
		return store.RunHead{}, false, err
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	var cur store.RunHead
	created := false
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		created = false
		tag, err := tx.Exec(ctx, `INSERT INTO car_runs (run_id, agent_id, intent, owner, node, status, started_at, turns, records)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 1) ON CONFLICT (run_id) DO NOTHING`,
			h.RunID, h.AgentID, h.Intent, h.Owner, l.node, store.RunInProgress, h.StartedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			if _, err := tx.Exec(ctx, "INSERT INTO car_run_records (run_id, seq, record) VALUES ($1, 0, $2)", h.RunID, string(started.Body)); err != nil {
				return err
			}
			cur = store.RunHead{RunID: h.RunID, AgentID: h.AgentID, Intent: h.Intent, Owner: h.Owner, Node: l.node,
				Status: store.RunInProgress, StartedAt: h.StartedAt.UTC(), Records: 1}
			created = true
			return nil
		}
		// The run exists (a conflicting insert waited for its commit).
		cur, err = scanRunHead(tx.QueryRow(ctx, "SELECT "+runHeadColumns+" FROM car_runs WHERE run_id = $1 FOR UPDATE", h.RunID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("run %s was removed while it was being started; start it again", h.RunID)
		case err != nil:
			return err
		case cur.AgentID != h.AgentID:
			return store.ErrRunNotFound
		}
		if _, err := tx.Exec(ctx, "UPDATE car_runs SET owner = $2, node = $3 WHERE run_id = $1", h.RunID, h.Owner, l.node); err != nil {
			return err
		}
		cur.Owner, cur.Node = h.Owner, l.node
		return nil
	})
	if err != nil {
		return store.RunHead{}, false, fmt.Errorf("start run %s: %w", h.RunID, unavailable(err))
	}
	return cur, created, nil
}

// Append adds a batch under the run's row lock, in one transaction: its
// records, then the head's counts (and end).
func (l *runLog) Append(ctx context.Context, runID string, next func(store.RunHead) (store.RunBatch, error)) (store.RunHead, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	var out store.RunHead
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		h, err := scanRunHead(tx.QueryRow(ctx, "SELECT "+runHeadColumns+" FROM car_runs WHERE run_id = $1 FOR UPDATE", runID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.ErrRunNotFound
		case err != nil:
			return err
		case h.Status != store.RunInProgress:
			return fmt.Errorf("%w (%s)", store.ErrRunEnded, h.Status)
		}
		batch, err := next(h)
		if err != nil {
			return err
		}
		seqs := make([]int32, len(batch.Records))
		bodies := make([]string, len(batch.Records))
		turns := 0
		for i, rec := range batch.Records {
			if err := store.CheckRunRecord(i, rec.Body); err != nil {
				return err
			}
			seqs[i], bodies[i] = int32(h.Records+i), string(rec.Body)
			if rec.Kind == store.RunTurn {
				turns++
			}
		}
		if len(seqs) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO car_run_records (run_id, seq, record)
				SELECT $1, s, r::json FROM unnest($2::integer[], $3::text[]) AS t(s, r)`, runID, seqs, bodies); err != nil {
				return err
			}
		}
		h.Turns += turns
		h.Records += len(seqs)
		if e := batch.End; e != nil {
			at := e.At.UTC()
			h.Status, h.EndedAt, h.Outcome = e.Status, &at, e.Outcome
		}
		var outcome *string
		if h.Outcome != nil {
			s := string(h.Outcome)
			outcome = &s
		}
		if _, err := tx.Exec(ctx, "UPDATE car_runs SET turns = $2, records = $3, status = $4, ended_at = $5, outcome = $6::json WHERE run_id = $1",
			runID, h.Turns, h.Records, h.Status, h.EndedAt, outcome); err != nil {
			return err
		}
		out = h
		return nil
	})
	if err != nil {
		return store.RunHead{}, fmt.Errorf("append to run %s: %w", runID, unavailable(err))
	}
	return out, nil
}

// Head reads a run's head.
func (l *runLog) Head(ctx context.Context, runID string) (store.RunHead, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	h, err := scanRunHead(l.pool.QueryRow(ctx, "SELECT "+runHeadColumns+" FROM car_runs WHERE run_id = $1", runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.RunHead{}, store.ErrRunNotFound
	}
	if err != nil {
		return store.RunHead{}, fmt.Errorf("read run %s: %w", runID, unavailable(err))
	}
	return h, nil
}

// Records reads a run's records in [from, to).
func (l *runLog) Records(ctx context.Context, runID string, from, to int) ([]json.RawMessage, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT record::text FROM car_run_records
		WHERE run_id = $1 AND seq >= $2 AND ($3 < 0 OR seq < $3) ORDER BY seq`, runID, from, to)
	if err != nil {
		return nil, fmt.Errorf("read the records of run %s: %w", runID, unavailable(err))
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the records of run %s: %w", runID, unavailable(err))
	}
	if len(texts) == 0 {
		// None in range: say whether the run exists at all.
		var one int
		err := l.pool.QueryRow(ctx, "SELECT 1 FROM car_runs WHERE run_id = $1", runID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrRunNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", runID, unavailable(err))
		}
	}
	out := make([]json.RawMessage, len(texts))
	for i, t := range texts {
		out[i] = json.RawMessage(t)
	}
	return out, nil
}

// List reads an agent's runs, newest first.
func (l *runLog) List(ctx context.Context, agentID string) ([]store.RunHead, error) {
	return l.heads(ctx, "list the runs of agent "+agentID,
		"SELECT "+runHeadColumns+" FROM car_runs WHERE agent_id = $1 ORDER BY started_at DESC, run_id", agentID)
}

// Stranded reads this daemon's runs in progress.
func (l *runLog) Stranded(ctx context.Context) ([]store.RunHead, error) {
	return l.heads(ctx, "list this daemon's runs in progress",
		"SELECT "+runHeadColumns+" FROM car_runs WHERE node = $1 AND status = $2 ORDER BY run_id", l.node, store.RunInProgress)
}

func (l *runLog) heads(ctx context.Context, what, query string, args ...any) ([]store.RunHead, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.RunHead, error) { return scanRunHead(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, unavailable(err))
	}
	if out == nil {
		out = []store.RunHead{}
	}
	return out, nil
}
