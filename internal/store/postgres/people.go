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

// people keeps the people's host-role token hashes in car_people_tokens.
// Every Identify reads the table, so an issue or a revoke on any daemon
// (or by an operator's command) is in force on every daemon at once.
type people struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.People = (*people)(nil)

func (p *people) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout)
}

// Issue stores the hash of token as name's, replacing any earlier one.
func (p *people) Issue(ctx context.Context, name, token string) error {
	if err := storable("name", name); err != nil {
		return err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	if _, err := p.pool.Exec(ctx, `INSERT INTO car_people_tokens (name, hash, issued_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET hash = EXCLUDED.hash, issued_at = EXCLUDED.issued_at`,
		name, store.HashToken(token), time.Now().UTC()); err != nil {
		return fmt.Errorf("issue %s's token: %w", name, unavailable(err))
	}
	return nil
}

// Revoke deletes name's token.
func (p *people) Revoke(ctx context.Context, name string) (bool, error) {
	if storable("name", name) != nil {
		return false, nil // it could never have been issued
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	tag, err := p.pool.Exec(ctx, "DELETE FROM car_people_tokens WHERE name = $1", name)
	if err != nil {
		return false, fmt.Errorf("revoke %s's token: %w", name, unavailable(err))
	}
	return tag.RowsAffected() == 1, nil
}

// List names the people with a token, by name (in byte order).
func (p *people) List(ctx context.Context) ([]store.IssuedPerson, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT name, issued_at FROM car_people_tokens ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list the people with a token: %w", unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.IssuedPerson, error) {
		var ip store.IssuedPerson
		err := r.Scan(&ip.Name, &ip.IssuedAt)
		ip.IssuedAt = ip.IssuedAt.UTC()
		return ip, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the people with a token: %w", unavailable(err))
	}
	if out == nil {
		out = []store.IssuedPerson{}
	}
	return out, nil
}

// Identify looks the token's hash up: the hash is what is compared, so the
// lookup's time says nothing of the token.
func (p *people) Identify(ctx context.Context, token string) (string, bool, error) {
	if token == "" {
		return "", false, nil
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	var name string
	err := p.pool.QueryRow(ctx, "SELECT name FROM car_people_tokens WHERE hash = $1", store.HashToken(token)).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("identify a person's token: %w", unavailable(err))
	}
	return name, true, nil
}
