package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// taint keeps the taint ledger in car_taint, one row per tainted key of a
// tenant, for every daemon of the cluster: a key one daemon taints gates
// the next admission that reads it on any other.
type taint struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.Taint = (*taint)(nil)

const taintColumns = `key, proposal_id, action_id, tool, origin, at`

func scanTaint(rows pgx.Rows) ([]protocol.TaintEntry, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.TaintEntry, error) {
		var e protocol.TaintEntry
		err := r.Scan(&e.Key, &e.ProposalID, &e.ActionID, &e.Tool, &e.Origin, &e.At)
		return e, err
	})
}

func (t *taint) Lookup(ctx context.Context, tenant string, keys []string) (map[string]protocol.TaintEntry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	list, err := t.List(ctx, tenant, keys)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]protocol.TaintEntry, len(list))
	for _, e := range list {
		out[e.Key] = e
	}
	return out, nil
}

func (t *taint) List(ctx context.Context, tenant string, keys []string) ([]protocol.TaintEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var rows pgx.Rows
	var err error
	if keys == nil {
		rows, err = t.pool.Query(ctx, `SELECT `+taintColumns+` FROM car_taint WHERE tenant = $1 ORDER BY key`, tenant)
	} else {
		rows, err = t.pool.Query(ctx, `SELECT `+taintColumns+` FROM car_taint WHERE tenant = $1 AND key = ANY($2) ORDER BY key`, tenant, keys)
	}
	if err != nil {
		return nil, fmt.Errorf("read the taint ledger: %w", unavailable(err))
	}
	out, err := scanTaint(rows)
	if err != nil {
		return nil, fmt.Errorf("read the taint ledger: %w", unavailable(err))
	}
	if out == nil {
		out = []protocol.TaintEntry{}
	}
	return out, nil
}

func (t *taint) Count(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var n int
	if err := t.pool.QueryRow(ctx, `SELECT count(*) FROM car_taint`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the taint ledger: %w", unavailable(err))
	}
	return n, nil
}

func (t *taint) Put(ctx context.Context, tenant string, entries []protocol.TaintEntry) error {
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	n := len(entries)
	keys, props, acts, tools, origins, ats := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range entries {
		keys[i], props[i], acts[i], tools[i], origins[i], ats[i] = e.Key, e.ProposalID, e.ActionID, e.Tool, e.Origin, e.At
	}
	// One statement for the batch; a key twice in it keeps its last entry.
	_, err := t.pool.Exec(ctx, `INSERT INTO car_taint (tenant, `+taintColumns+`)
		SELECT DISTINCT ON (k) $1, k, p, a, tl, o, at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(k, p, a, tl, o, at, ord)
		ORDER BY k, ord DESC
		ON CONFLICT (tenant, key) DO UPDATE SET proposal_id = EXCLUDED.proposal_id, action_id = EXCLUDED.action_id,
			tool = EXCLUDED.tool, origin = EXCLUDED.origin, at = EXCLUDED.at`,
		tenant, keys, props, acts, tools, origins, ats)
	if err != nil {
		return fmt.Errorf("record %d tainted keys: %w", n, unavailable(err))
	}
	return nil
}

func (t *taint) Delete(ctx context.Context, tenant string, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rows, err := t.pool.Query(ctx, `DELETE FROM car_taint WHERE tenant = $1 AND key = ANY($2) RETURNING key`, tenant, keys)
	if err != nil {
		return nil, fmt.Errorf("clear %d keys' taint: %w", len(keys), unavailable(err))
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("clear %d keys' taint: %w", len(keys), unavailable(err))
	}
	slices.Sort(gone)
	return gone, nil
}
