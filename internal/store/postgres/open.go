package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store"
)

// DB is one daemon's handle on the shared store.
type DB struct {
	cfg  Config
	pool *pgxpool.Pool
}

// Open connects (bounded pool, statement timeout), applies the embedded
// migrations under the advisory lock, and refuses a database whose schema
// is newer than this binary.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg.setDefaults()
	if cfg.Node == "" {
		return nil, fmt.Errorf("a member id (Node) is required")
	}
	pool, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMigrator(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	_, err = m.up(ctx)
	m.close()
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &DB{cfg: cfg, pool: pool}, nil
}

// Store returns the seam's view of db.
func (db *DB) Store() *store.Store {
	return &store.Store{Kind: "postgres", Node: db.cfg.Node, Close: db.Close}
}

// Close releases the pool.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}
