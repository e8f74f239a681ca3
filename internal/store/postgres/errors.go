package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/parslee-ai/car-server/internal/store"
)

// unavailable wraps err in store.ErrUnavailable when it says that the
// database cannot be reached or did not answer in time: a connection that
// failed, was refused, reset or closed; a pool that is closed or whose
// acquire timed out; a server shutting down or crashed; a statement that
// outran its timeout. Such an error means the work did not commit. Any other
// error (a constraint, a bad value, the caller's own cancellation) is
// returned as it is, and nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || !isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w (%w); check that PostgreSQL runs and is reachable: work that needs it resumes by itself once it answers", store.ErrUnavailable, err)
}

// isUnavailable says whether err is a connection-level failure.
func isUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08": // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		case pe.Code == "53300": // too many connections
			return true
		case pe.Code == "57014": // the statement outran statement_timeout
			return true
		}
		// A server error inside a failed connection attempt is still a
		// failed connection attempt; any other is about the statement.
		var ce *pgconn.ConnectError
		return errors.As(err, &ce)
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; the database is not to blame
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return pgconn.SafeToRetry(err) ||
		pgconn.Timeout(err) ||
		errors.As(err, &ce) ||
		errors.As(err, &ne) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, context.DeadlineExceeded) // a pool acquire or a connect that ran out of time
}
