package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// Shared state in car_state: one row per (tenant, key) holding the value's
// JSON text and the version of the write that stored it, taken from the
// car_state_version sequence. Every read goes to the database, so state.*
// reads see every daemon's writes; the last committed write wins.
type state struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.State = (*state)(nil)

// encodeValue is a decoded JSON value as the text stored. json.Number keeps
// its digits; map keys come out sorted.
func encodeValue(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("a state value must be JSON: %w", err)
	}
	return string(b), nil
}

// decodeValue is stored text decoded as the engine decodes values.
func decodeValue(tenant, key, text string) (any, error) {
	v, err := protocol.DecodeValue([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("state key %q (tenant %q) does not hold valid JSON: %w", key, tenant, err)
	}
	return v, nil
}

func (s *state) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Get returns the value at key in tenant's namespace.
func (s *state) Get(ctx context.Context, tenant, key string) (any, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var text string
	err := s.pool.QueryRow(ctx, "SELECT value::text FROM car_state WHERE tenant = $1 AND key = $2", tenant, key).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read state key %q: %w", key, unavailable(err))
	}
	v, err := decodeValue(tenant, key, text)
	return v, err == nil, err
}

// Set stores value at key.
func (s *state) Set(ctx context.Context, tenant, key string, value any) error {
	text, err := encodeValue(value)
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err = s.pool.Exec(ctx, `INSERT INTO car_state (tenant, key, value, version) VALUES ($1, $2, $3, nextval('car_state_version'))
		ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version`, tenant, key, text)
	if err != nil {
		return fmt.Errorf("write state key %q: %w", key, unavailable(err))
	}
	return nil
}

// Write stores value at key and returns the version it stamped and what
// the key held before, both from one transaction that locks the row, so
// the prior is exactly what this write replaced.
func (s *state) Write(ctx context.Context, tenant, key string, value any) (uint64, store.Prior, error) {
	text, err := encodeValue(value)
	if err != nil {
		return 0, store.Prior{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var version int64
	var prior store.Prior
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A key inserted by another daemon between the SELECT and the
		// INSERT makes the INSERT do nothing: read it again, locked.
		for range 8 {
			var old string
			var oldVersion int64
			err := tx.QueryRow(ctx, "SELECT value::text, version FROM car_state WHERE tenant = $1 AND key = $2 FOR UPDATE", tenant, key).Scan(&old, &oldVersion)
			switch {
			case err == nil:
				v, err := decodeValue(tenant, key, old)
				if err != nil {
					return err
				}
				prior = store.Prior{Value: v, Existed: true, Version: uint64(oldVersion)}
				return tx.QueryRow(ctx, `UPDATE car_state SET value = $3, version = nextval('car_state_version')
					WHERE tenant = $1 AND key = $2 RETURNING version`, tenant, key, text).Scan(&version)
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
			err = tx.QueryRow(ctx, `INSERT INTO car_state (tenant, key, value, version) VALUES ($1, $2, $3, nextval('car_state_version'))
				ON CONFLICT (tenant, key) DO NOTHING RETURNING version`, tenant, key, text).Scan(&version)
			if err == nil {
				prior = store.Prior{}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return fmt.Errorf("state key %q kept changing under this write; try again", key)
	})
	if err != nil {
		return 0, store.Prior{}, fmt.Errorf("write state key %q: %w", key, unavailable(err))
	}
	return uint64(version), prior, nil
}

// Restore puts prior back at key only while the key still holds the write
// stamped version (a compare-and-swap in one statement), and reports whether
// it did: a value written since then is the later write's and stays.
func (s *state) Restore(ctx context.Context, tenant, key string, version uint64, prior store.Prior) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var tagErr error
	var n int64
	if prior.Existed {
		text, err := encodeValue(prior.Value)
		if err != nil {
			return false, err
		}
		tag, err := s.pool.Exec(ctx, "UPDATE car_state SET value = $4, version = $5 WHERE tenant = $1 AND key = $2 AND version = $3",
			tenant, key, int64(version), text, int64(prior.Version))
		n, tagErr = tag.RowsAffected(), err
	} else {
		tag, err := s.pool.Exec(ctx, "DELETE FROM car_state WHERE tenant = $1 AND key = $2 AND version = $3", tenant, key, int64(version))
		n, tagErr = tag.RowsAffected(), err
	}
	if tagErr != nil {
		return false, fmt.Errorf("restore state key %q: %w", key, unavailable(tagErr))
	}
	return n == 1, nil
}

// Keys returns the keys of tenant's namespace in byte order.
func (s *state) Keys(ctx context.Context, tenant string) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT key FROM car_state WHERE tenant = $1 ORDER BY key COLLATE "C"`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list state keys: %w", unavailable(err))
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list state keys: %w", unavailable(err))
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// Snapshot returns a copy of tenant's namespace.
func (s *state) Snapshot(ctx context.Context, tenant string) (map[string]any, error) {
	all, err := s.export(ctx, &tenant)
	if err != nil {
		return nil, err
	}
	return all[tenant], nil
}

// Export copies one namespace (tenant non-nil, present even when empty) or
// every namespace that holds a key.
func (s *state) Export(ctx context.Context, tenant *string) (map[string]map[string]any, error) {
	return s.export(ctx, tenant)
}

func (s *state) export(ctx context.Context, tenant *string) (map[string]map[string]any, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var rows pgx.Rows
	var err error
	if tenant != nil {
		rows, err = s.pool.Query(ctx, "SELECT tenant, key, value::text FROM car_state WHERE tenant = $1", *tenant)
	} else {
		rows, err = s.pool.Query(ctx, "SELECT tenant, key, value::text FROM car_state")
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", unavailable(err))
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	if tenant != nil {
		out[*tenant] = map[string]any{}
	}
	for rows.Next() {
		var t, k, text string
		if err := rows.Scan(&t, &k, &text); err != nil {
			return nil, fmt.Errorf("read state: %w", unavailable(err))
		}
		v, err := decodeValue(t, k, text)
		if err != nil {
			return nil, err
		}
		space := out[t]
		if space == nil {
			space = map[string]any{}
			out[t] = space
		}
		space[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read state: %w", unavailable(err))
	}
	return out, nil
}

// Replace swaps one namespace (tenant non-nil) or all of them for spaces,
// in one transaction; every key gets a fresh version, so the rollback of a
// write made before the replace never mistakes a replaced value for its
// own. It returns the number of keys written.
func (s *state) Replace(ctx context.Context, tenant *string, spaces map[string]map[string]any) (int, error) {
	type space struct {
		keys, values []string
	}
	enc := map[string]space{}
	for name, values := range spaces {
		if tenant != nil && name != *tenant {
			continue
		}
		sp := space{keys: make([]string, 0, len(values)), values: make([]string, 0, len(values))}
		for k, v := range values {
			text, err := encodeValue(v)
			if err != nil {
				return 0, fmt.Errorf("state key %q (tenant %q): %w", k, name, err)
			}
			sp.keys = append(sp.keys, k)
			sp.values = append(sp.values, text)
		}
		enc[name] = sp
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		var err error
		if tenant != nil {
			_, err = tx.Exec(ctx, "DELETE FROM car_state WHERE tenant = $1", *tenant)
		} else {
			_, err = tx.Exec(ctx, "DELETE FROM car_state")
		}
		if err != nil {
			return err
		}
		for name, sp := range enc {
			tag, err := tx.Exec(ctx, `INSERT INTO car_state (tenant, key, value, version)
				SELECT $1, k, v::json, nextval('car_state_version') FROM unnest($2::text[], $3::text[]) AS t(k, v)`,
				name, sp.keys, sp.values)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replace state: %w", unavailable(err))
	}
	return n, nil
}
