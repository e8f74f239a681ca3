package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parslee-ai/car-server/internal/store/postgres/pgtest"
)

// After PostgreSQL restarts, no connection of the old server is handed out,
// even one the pool would not ping because it was used within the second.
// The control runs the same steps without the check, and sees the dead
// connections the check exists for.
func TestNoDeadConnectionAfterRestart(t *testing.T) {
	t.Parallel()
	for _, checked := range []bool{true, false} {
		name := map[bool]string{true: "checked", false: "control without the check"}[checked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			failed := queriesAfterRestart(t, checked)
			if checked && failed != 0 {
				t.Fatalf("%d of the pool's connections failed after the restart, want 0", failed)
			}
			if !checked && failed == 0 {
				t.Fatal("without the check every connection answered after the restart: the test no longer shows dead connections")
			}
		})
	}
}

// queriesAfterRestart fills a pool of three connections, restarts the
// server, and counts how many of three connections then held at once fail
// a query.
func queriesAfterRestart(t *testing.T, checked bool) (failed int) {
	const conns = 3
	srv := pgtest.NewServer(t)
	cfg := Config{URL: srv.NewDatabase(t), MaxConns: conns, StatementTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second}
	pc, err := poolConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// As if each connection had been used within the last second.
	pc.ShouldPing = func(_ context.Context, _ pgxpool.ShouldPingParams) bool { return false }
	if !checked {
		pc.ConnConfig.Tracer, pc.AfterConnect, pc.PrepareConn = nil, nil, nil
	}
	ctx := ctxT(t)
	pool, err := openPool(ctx, cfg, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	holdAll := func() []*pgxpool.Conn {
		held := make([]*pgxpool.Conn, 0, conns)
		for range conns {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		return held
	}
	for _, c := range holdAll() {
		if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
	srv.Stop(t)
	if _, err := pool.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query on a stopped server succeeded")
	}
	srv.Start(t)
	for _, c := range holdAll() {
		if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
			failed++
		}
		c.Release()
	}
	return failed
}
