package postgres

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Several daemons starting at once migrate exactly once.
func TestConcurrentStartsMigrateOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	applied := make([]int, 6)
	errs := make([]error, 6)
	for i := range applied {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = MigrateUp(ctx, Config{URL: url})
		}()
	}
	wg.Wait()
	total := 0
	for i := range applied {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	embedded, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil || len(embedded) < 3 {
		t.Fatalf("the embedded migrations: %v %v", embedded, err)
	}
	want := len(embedded)
	if total != want {
		t.Fatalf("migrations applied across 6 concurrent starts = %d, want %d (each migration, once)", total, want)
	}
	st, version, err := MigrateStatus(ctx, Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	// Numbers may skip (each branch takes its own), so the version is the
	// newest file's number.
	newest, err := strconv.ParseInt(strings.SplitN(path.Base(embedded[len(embedded)-1]), "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("the newest migration %s has no number: %v", embedded[len(embedded)-1], err)
	}
	if version != newest || len(st) != want {
		t.Fatalf("status = %+v at version %d, want %d applied migrations at version %d", st, version, want, newest)
	}
	for _, m := range st {
		if !m.Applied {
			t.Fatalf("status = %+v: migration %d is not applied", st, m.Version)
		}
	}
}

// A database migrated by a newer binary refuses the start, and says so.
func TestNewerSchemaRefusesStart(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := ctxT(t)
	if _, err := MigrateUp(ctx, Config{URL: url}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO car_schema_version (version_id, is_applied) VALUES (99, true)"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Config{URL: url, Node: "n1"})
	if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open on a newer schema = %v, want ErrSchemaNewer naming version 99", err)
	}
}

// An unreachable database fails the start with a clear message, and the
// password in the URL is not in it.
func TestUnreachableRedactsPassword(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, err := Open(ctx, Config{URL: "postgres://car:s3cret-pw@127.0.0.1:1/car?sslmode=disable", Node: "n1", ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("error does not wrap store.ErrUnavailable: %v", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "cannot reach PostgreSQL") {
		t.Errorf("error does not say what is wrong: %v", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h/db":                "postgres://u:xxxxx@h/db",
		"postgres://u@h/db?password=pw&x=1":   "postgres://u@h/db?password=xxxxx&x=1",
		"postgres://h/db":                     "postgres://h/db",
		"postgres://u:p%40ss@h:5432/db?ssl=1": "postgres://u:xxxxx@h:5432/db?ssl=1",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
