package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockID is the advisory lock every daemon takes around migrating,
// so several daemons starting at once migrate exactly once; a daemon that
// finds it held tries again every second, for up to five minutes.
const migrationLockID = 0x6361722d73727672 // "car-srvr"

// MigrationStatus is one embedded migration and whether the database has it.
type MigrationStatus struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
}

// migrator runs the embedded migrations over a database/sql handle on pool.
type migrator struct {
	db *sql.DB
	p  *goose.Provider
}

func newMigrator(pool *pgxpool.Pool) (*migrator, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithSessionLocker(locker), goose.WithTableName("car_schema_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		db.Close()
		return nil, err
	}
	return &migrator{db: db, p: p}, nil
}

func (m *migrator) close() { m.db.Close() }

// ErrSchemaNewer says the database was migrated by a newer car-server.
var ErrSchemaNewer = errors.New("the database schema is newer than this car-server")

// versions returns the database's schema version and the newest this binary
// knows.
func (m *migrator) versions(ctx context.Context) (current, known int64, err error) {
	current, err = m.p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read the schema version: %w", err)
	}
	for _, s := range m.p.ListSources() {
		known = max(known, s.Version)
	}
	return current, known, nil
}

// schemaNewer refuses a database a newer car-server migrated.
func schemaNewer(current, known int64) error {
	return fmt.Errorf("%w: the database is at schema version %d, this binary knows up to %d; run the newer car-server (or a binary built from it)", ErrSchemaNewer, current, known)
}

// up applies what is missing under the advisory lock, and refuses a
// database newer than the binary.
func (m *migrator) up(ctx context.Context) (applied int, err error) {
	current, known, err := m.versions(ctx)
	if err != nil {
		return 0, err
	}
	if current > known {
		return 0, schemaNewer(current, known)
	}
	res, err := m.p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate the database: %w", err)
	}
	return len(res), nil
}

func (m *migrator) status(ctx context.Context) ([]MigrationStatus, error) {
	st, err := m.p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}
