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
)

// harness keeps the harness config in the one row of car_harness.
type harness struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.Harness = (*harness)(nil)

func (h *harness) Load(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var doc []byte
	err := h.pool.QueryRow(ctx, `SELECT doc FROM car_harness WHERE id = 1`).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the harness config: %w", unavailable(err))
	}
	return doc, nil
}

func (h *harness) Save(ctx context.Context, doc json.RawMessage) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	_, err := h.pool.Exec(ctx,
		`INSERT INTO car_harness (id, doc) VALUES (1, $1::jsonb) ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc`, string(doc))
	if err != nil {
		return fmt.Errorf("save the harness config: %w", unavailable(err))
	}
	return nil
}
