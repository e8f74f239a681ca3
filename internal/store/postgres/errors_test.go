package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

func TestUnavailableClassifies(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "x"} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection failure 08006", pg("08006"), true},
		{"connection does not exist 08003", pg("08003"), true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"crash shutdown 57P02", pg("57P02"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"too many connections 53300", pg("53300"), true},
		{"statement timeout 57014", pg("57014"), true},
		{"unique violation 23505", pg("23505"), false},
		{"syntax error 42601", pg("42601"), false},
		{"EOF", fmt.Errorf("read: %w", io.EOF), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"closed pool", fmt.Errorf("acquire: %w", puddle.ErrClosedPool), true},
		{"acquire timed out", fmt.Errorf("acquire: %w", context.DeadlineExceeded), true},
		{"conn closed", pgconn.ErrConnClosed, true},
		{"caller cancelled", fmt.Errorf("query: %w", context.Canceled), false},
		{"a plain error", errors.New("decision must be approved or rejected"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unavailable(tc.err)
			if errors.Is(got, store.ErrUnavailable) != tc.want {
				t.Fatalf("unavailable(%v) = %v; wraps ErrUnavailable = %v, want %v", tc.err, got, !tc.want, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("unavailable(%v) = %v lost the cause", tc.err, got)
			}
			if tc.want && !strings.Contains(got.Error(), "the shared store is unavailable") {
				t.Fatalf("message %q does not say the store is unavailable", got)
			}
			if !tc.want && got != tc.err {
				t.Fatalf("unavailable changed an error that is not about reaching the database: %v", got)
			}
		})
	}
	if unavailable(nil) != nil {
		t.Fatal("unavailable(nil) is not nil")
	}
	once := unavailable(io.EOF)
	if unavailable(once) != once {
		t.Fatal("an error already wrapping ErrUnavailable was wrapped again")
	}
}

// Real failures from pgx classify: a closed pool, and a server that went
// away under an open pool.
func TestUnavailableFromRealFailures(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	url := srv.NewDatabase(t)
	ctx := ctxT(t)
	pool, err := connect(ctx, Config{URL: url, MaxConns: 2, StatementTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	_, err = pool.Exec(ctx, "SELECT 1")
	if err == nil || !errors.Is(unavailable(err), store.ErrUnavailable) {
		t.Fatalf("a query on a stopped server: %v, want an error that classifies as unavailable", err)
	}
	_, err = pool.Exec(ctx, "SELECT 1") // now a fresh connection is refused
	if err == nil || !errors.Is(unavailable(err), store.ErrUnavailable) {
		t.Fatalf("a connection to a stopped server: %v, want an error that classifies as unavailable", err)
	}
	pool.Close()
	_, err = pool.Exec(ctx, "SELECT 1")
	if err == nil || !errors.Is(unavailable(err), store.ErrUnavailable) {
		t.Fatalf("a query on a closed pool: %v, want an error that classifies as unavailable", err)
	}
}
