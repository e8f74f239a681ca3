package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// liveness keeps the pool from handing out a connection that died with the
// server. When PostgreSQL restarts, every connection the pool held is dead,
// and a statement sent on one fails although the database answers again.
// The pool pings a connection idle for more than a second before its use;
// one used more recently can still be dead. So once any statement or connect
// has failed for lack of the database, every connection last checked before
// that failure is pinged once before its next use, and dropped if it does
// not answer. Connections checked since, and all of them while nothing has
// failed, cost one atomic load per acquire.
type liveness struct {
	failedAt atomic.Int64 // unix nanoseconds of the last connection-level failure; 0: none
}

// checkedKey is where a connection keeps when it was last known alive.
const checkedKey = "car.liveness.checked"

// install hooks l into the pool's configuration.
func (l *liveness) install(pc *pgxpool.Config) {
	pc.ConnConfig.Tracer = l
	pc.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		c.PgConn().CustomData()[checkedKey] = time.Now().UnixNano()
		return nil
	}
	pc.PrepareConn = l.prepare
}

// prepare pings c if a failure was seen since c was last known alive; a
// connection that does not answer is destroyed, and the pool takes another.
func (l *liveness) prepare(ctx context.Context, c *pgx.Conn) (bool, error) {
	failed := l.failedAt.Load()
	if failed == 0 {
		return true, nil
	}
	data := c.PgConn().CustomData()
	if checked, _ := data[checkedKey].(int64); checked > failed {
		return true, nil
	}
	if err := c.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err() // the caller gave up; the connection may be fine
		}
		return false, nil
	}
	data[checkedKey] = time.Now().UnixNano()
	return true, nil
}

// saw records err if it says the database could not be reached.
func (l *liveness) saw(err error) {
	if err != nil && isUnavailable(err) {
		l.failedAt.Store(time.Now().UnixNano())
	}
}

func (l *liveness) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (l *liveness) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	l.saw(data.Err)
}

func (l *liveness) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *liveness) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (l *liveness) TraceBatchEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	l.saw(data.Err)
}

func (l *liveness) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (l *liveness) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) {
	l.saw(data.Err)
}
