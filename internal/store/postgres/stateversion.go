package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store"
)

var _ store.VersionReader = (*state)(nil)

// GetVersioned returns the value at key and the version of the write that
// stored it, in one read.
func (s *state) GetVersioned(ctx context.Context, tenant, key string) (any, uint64, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var text string
	var version int64
	err := s.pool.QueryRow(ctx, "SELECT value::text, version FROM car_state WHERE tenant = $1 AND key = $2", tenant, key).Scan(&text, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("read state key %q: %w", key, unavailable(err))
	}
	v, err := decodeValue(tenant, key, text)
	return v, uint64(version), err == nil, err
}
