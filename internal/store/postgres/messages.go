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

// messages is the messaging dedup ledger in car_messages: one row per
// idempotency key, the first delivery's receipt. A later Record of the same
// key does not overwrite it.
type messages struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ store.Messages = (*messages)(nil)

// Delivered returns the receipt of an earlier delivery under key.
func (m *messages) Delivered(ctx context.Context, key string) (store.Receipt, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var r store.Receipt
	err := m.pool.QueryRow(ctx, "SELECT channel, message_id FROM car_messages WHERE key = $1", key).Scan(&r.Channel, &r.MessageID)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Receipt{}, false, nil
	}
	if err != nil {
		return store.Receipt{}, false, fmt.Errorf("read the delivery of message key %q: %w", key, unavailable(err))
	}
	return r, true, nil
}

// Record remembers that key was delivered with r, unless an earlier
// delivery is already recorded (that one stays).
func (m *messages) Record(ctx context.Context, key string, r store.Receipt) error {
	_, _, err := m.RecordFirst(ctx, key, r)
	return err
}

// RecordFirst is Record that says which receipt the ledger holds for key
// afterwards: r when this call inserted it (first), else the earlier one.
func (m *messages) RecordFirst(ctx context.Context, key string, r store.Receipt) (held store.Receipt, first bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	// The CTE inserts or, on a conflict, yields nothing; the union then
	// reads the row that won (committed before this statement's snapshot
	// or waited for by the insert).
	err = m.pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO car_messages (key, channel, message_id, recorded_at) VALUES ($1, $2, $3, now())
			ON CONFLICT (key) DO NOTHING RETURNING channel, message_id)
		SELECT channel, message_id, true FROM ins
		UNION ALL
		SELECT channel, message_id, false FROM car_messages WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)`,
		key, r.Channel, r.MessageID).Scan(&held.Channel, &held.MessageID, &first)
	if errors.Is(err, pgx.ErrNoRows) {
		// The winner committed after this statement's snapshot was taken:
		// read it now.
		held, ok, rerr := m.Delivered(ctx, key)
		switch {
		case rerr != nil:
			return store.Receipt{}, false, rerr
		case !ok:
			return store.Receipt{}, false, fmt.Errorf("record the delivery of message key %q: an earlier delivery conflicted but is gone; record it again", key)
		}
		return held, false, nil
	}
	if err != nil {
		return store.Receipt{}, false, fmt.Errorf("record the delivery of message key %q: %w", key, unavailable(err))
	}
	return held, first, nil
}
